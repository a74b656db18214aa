// An account's email as the operator and the console accept it: one @, no spaces, a local part up to 64 and a
// domain up to 253 characters (not a full RFC 5322 parse: the mail itself is the proof).
export const EMAIL_MAX = 320;
const EMAIL_RE = /^[^\s@]{1,64}@[^\s@]{1,253}$/;

export function isEmailAddress(s: string): boolean {
  return s.length <= EMAIL_MAX && EMAIL_RE.test(s);
}
