// The one password rule for passwords a person chooses (console log-in, and proxy passwords given to
// `proxyd admin … --password-stdin`), whether set in the console or with `proxyd admin`.

export const MIN_PASSWORD_CHARS = 10;
/** Bounds the hashing work per attempt; 255 bytes is far above any passphrase a person types. */
export const MAX_PASSWORD_BYTES = 255;

/** What is wrong with a chosen password ("at least 10 characters long", …), or null when it is acceptable. */
export function passwordProblem(password: string): string | null {
  if ([...password].length < MIN_PASSWORD_CHARS) return `at least ${MIN_PASSWORD_CHARS} characters long`;
  if (new TextEncoder().encode(password).length > MAX_PASSWORD_BYTES) return `at most ${MAX_PASSWORD_BYTES} bytes long`;
  return null;
}
