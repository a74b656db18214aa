// The result shape every pure parser returns: never throws, the error is a value.
export type ParseResult<T, E extends string> =
  { kind: 'incomplete' } | { kind: 'error'; error: E } | { kind: 'ok'; value: T; consumed: number };

export const INCOMPLETE = { kind: 'incomplete' } as const;

export function fail<E extends string>(error: E): { kind: 'error'; error: E } {
  return { kind: 'error', error };
}
