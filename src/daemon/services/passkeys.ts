// Passkeys (WebAuthn, @simplewebauthn/server) as the console's second factor: registration on the Account page,
// an assertion after the password at log-in or to confirm an action. The relying party is the console's host name
// as the browser reached it (browsers refuse IP literals: `http://localhost:PORT` locally), or `--console-origin`.
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Passkey } from '../store/index.js';

/** How long a browser has to answer a challenge. */
export const CHALLENGE_TTL_MS = 5 * 60_000;

/** Where the browser is: the origin it reached the console at, and the relying party id (its host name). */
export interface RelyingParty {
  origin: string;
  rpId: string;
}

/** The relying party: `--console-origin` when set, else the request's own scheme and host. */
export function relyingParty(consoleOrigin: string | null, protocol: string, host: string): RelyingParty {
  if (consoleOrigin) return { origin: consoleOrigin, rpId: new URL(consoleOrigin).hostname };
  const origin = `${protocol}://${host}`;
  return { origin, rpId: new URL(origin).hostname };
}

/** A challenge handed to the browser, kept in its session until answered or expired. */
export interface PendingChallenge {
  challenge: string;
  purpose: 'register' | 'login' | 'confirm';
  expiresAtMs: number;
}

export class PasskeyError extends Error {
  override name = 'PasskeyError';
}

/** Why an answer is refused before any signature is looked at: none asked for, another purpose's, or expired. */
export function pendingProblem(
  p: PendingChallenge | undefined,
  purpose: PendingChallenge['purpose'],
  nowMs: number,
): string | null {
  if (!p || p.purpose !== purpose) return 'No passkey request is open in this browser. Start again.';
  if (p.expiresAtMs <= nowMs) return 'The passkey request expired. Start again.';
  return null;
}

/** The browser's answer names the challenge it signed: a different one is an answer to another request. */
function answeredChallenge(response: { response?: { clientDataJSON?: unknown } }): string | null {
  try {
    const raw = response.response?.clientDataJSON;
    if (typeof raw !== 'string') return null;
    const c = (JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as { challenge?: unknown }).challenge;
    return typeof c === 'string' ? c : null;
  } catch {
    return null;
  }
}

function checkShape(
  response: unknown,
): asserts response is { id: string; rawId: string; type: string; response: Record<string, unknown> } {
  const r = response as { id?: unknown; rawId?: unknown; type?: unknown; response?: unknown } | null;
  if (
    !r ||
    typeof r !== 'object' ||
    typeof r.id !== 'string' ||
    typeof r.rawId !== 'string' ||
    r.type !== 'public-key' ||
    !r.response ||
    typeof r.response !== 'object'
  ) {
    throw new PasskeyError('The passkey answer is malformed.');
  }
}

export async function registrationOptions(
  rp: RelyingParty,
  account: { id: number; email: string },
  existing: readonly Passkey[],
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  return generateRegistrationOptions({
    rpName: 'proxyd console',
    rpID: rp.rpId,
    userName: account.email,
    userID: new TextEncoder().encode(`proxyd-account-${account.id}`),
    attestationType: 'none',
    excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports })),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' },
  });
}

/**
 * Runs the library's check of an answer once its shape and its challenge are ours (an answer to another request is
 * refused before any signature is looked at); the library's refusal becomes a PasskeyError.
 */
async function checked<T extends { verified: boolean }>(
  pending: PendingChallenge,
  response: unknown,
  verify: () => Promise<T>,
): Promise<T> {
  checkShape(response);
  if (answeredChallenge(response) !== pending.challenge)
    throw new PasskeyError('The passkey answer is for another request. Start again.');
  let v: T;
  try {
    v = await verify();
  } catch (e) {
    throw new PasskeyError(`The passkey could not be verified: ${(e as Error).message.slice(0, 200)}`);
  }
  if (!v.verified) throw new PasskeyError('The passkey could not be verified.');
  return v;
}

/** The credential a registration answer proves, or a PasskeyError saying why not. */
export async function verifyRegistration(
  rp: RelyingParty,
  pending: PendingChallenge,
  response: unknown,
): Promise<{ credentialId: string; publicKey: Buffer; counter: number; transports: string[] }> {
  const v = await checked(pending, response, () =>
    verifyRegistrationResponse({
      response: response as RegistrationResponseJSON,
      expectedChallenge: pending.challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.rpId,
      requireUserVerification: false,
    }),
  );
  if (!v.verified) throw new PasskeyError('The passkey could not be verified.');
  const c = v.registrationInfo.credential;
  return {
    credentialId: c.id,
    publicKey: Buffer.from(c.publicKey),
    counter: c.counter,
    transports: c.transports ?? [],
  };
}

export async function authenticationOptions(
  rp: RelyingParty,
  passkeys: readonly Passkey[],
): Promise<PublicKeyCredentialRequestOptionsJSON> {
  return generateAuthenticationOptions({
    rpID: rp.rpId,
    allowCredentials: passkeys.map((p) => ({ id: p.credentialId, transports: p.transports })),
    userVerification: 'discouraged',
  });
}

/** The credential id an assertion names (to look its passkey up), or a PasskeyError. */
export function assertionCredential(response: unknown): string {
  checkShape(response);
  return response.id;
}

/** Checks an assertion against the passkey it names; its new signature counter, or a PasskeyError. */
export async function verifyAssertion(
  rp: RelyingParty,
  pending: PendingChallenge,
  response: unknown,
  passkey: Passkey,
): Promise<number> {
  const v = await checked(pending, response, () =>
    verifyAuthenticationResponse({
      response: response as AuthenticationResponseJSON,
      expectedChallenge: pending.challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.rpId,
      credential: {
        id: passkey.credentialId,
        publicKey: new Uint8Array(passkey.publicKey),
        counter: passkey.counter,
        transports: passkey.transports,
      },
      requireUserVerification: false,
    }),
  );
  return v.authenticationInfo.newCounter;
}
