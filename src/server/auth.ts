/**
 * Who is asking: turns the `Authorization: Bearer <JWT>` header into a user
 * id and the moment the token stops being accepted, with jose. The user is
 * the token's `sub` and nothing else, held to the rules of every user id
 * (`findNameProblem`: a lone surrogate or a NUL would be stored as another
 * user's id, or not at all). Any failure (no token, bad signature, expired,
 * no `exp`, not yet valid, `alg: none`, no `sub` or one that cannot be a
 * user id) is one `sync/unauthorized`; the reason goes in the message, never
 * a hint about other users. Settings that would accept forged or foreign
 * tokens (a guessable secret, JWKS without an audience) are refused when the
 * verifier is built. Revocation is the server's option, not this module's.
 */
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { TabulaError } from '../core/errors.js';
import { ID_MAX_LENGTH, findNameProblem } from '../core/names.js';

/** What a custom `verify` may return instead of the bare user id: the user, and when the token stops being accepted. */
export interface VerifiedUser {
  /** The user the token belongs to; held to the rules of every user id (1–256 characters of valid Unicode, no NUL). */
  readonly userId: string;
  /**
   * When the token stops being accepted, in ms since the epoch (as `Date.now()`): an event stream
   * opened with it ends then, and a time already past answers 401. Absent: the token does not expire
   * by itself (a `verify` that returns a bare string says the same).
   */
  readonly expiresAtMs?: number;
}

/** How the server checks tokens. */
export type SyncAuth =
  /** HS256 with a shared secret of 32+ random bytes: for development and single-tenant setups. Tokens must carry `exp`. */
  | { readonly secret: string | Uint8Array }
  /**
   * Tokens signed by an identity provider, keys fetched from its JWKS endpoint. `audience` (the `aud`
   * your provider puts in tokens for this app) is required: a provider signs tokens for all its apps
   * with the same keys. Tokens must carry `exp`.
   */
  | { readonly jwksUrl: string; readonly audience: string; readonly issuer?: string }
  /** Your own check: return the user id (or {@link VerifiedUser}), or throw. */
  | { readonly verify: (token: string) => string | VerifiedUser | Promise<string | VerifiedUser> };

/** A token the verifier accepted. */
export interface VerifiedToken {
  readonly userId: string;
  /** When the token stops being accepted, in ms since the epoch; null when it does not expire by itself. */
  readonly expiresAtMs: number | null;
}

/** Checks a bearer token and returns its user and expiry; throws `sync/unauthorized`. */
export type TokenVerifier = (token: string) => Promise<VerifiedToken>;

// A clock skew allowance between the issuer and this server.
const CLOCK_TOLERANCE_S = 5;
/**
 * The least variety a secret must show: its length times log2 of its distinct byte values, a bound
 * on the bits it can hold. Not an entropy measure, a guard against the obvious: 32 × 'a' has 0, a
 * word typed four times about 90; 32 random bytes have about 157 (under 128 with a probability far
 * below 1e-9), `openssl rand -base64 32` about 220, a 64-digit hex key 256.
 */
const MIN_SECRET_BITS = 128;
const GENERATE_SECRET = 'generate one with `openssl rand -base64 32`';

function unauthorized(message: string, cause?: unknown): TabulaError {
  return new TabulaError('sync/unauthorized', message, cause === undefined ? {} : { cause });
}

/** `value` as a user id; `what` names where it came from. */
function userIdOf(value: unknown, what: string): string {
  const problem = findNameProblem(value, ID_MAX_LENGTH);
  if (problem) throw unauthorized(`${what} cannot be a user id: it ${problem.replace(/^expected/, 'should be')}.`);
  return value as string;
}

function describeJoseError(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return 'The token has expired; get a new one.';
  if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === 'exp' && error.reason === 'missing') {
    return 'The token has no `exp` claim; the server accepts only tokens that expire (sign them with an `exp`, e.g. an hour ahead).';
  }
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `The token's \`${error.claim}\` claim is not acceptable (${error.reason}).`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'The token signature does not verify.';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'The token is signed with an algorithm this server does not accept.';
  return 'The token is not a valid JWT.';
}

/** What a custom `verify` returned, checked like a token's claims. */
function verifiedOf(returned: unknown): VerifiedToken {
  if (typeof returned !== 'object' || returned === null) return { userId: userIdOf(returned, 'The user id the verify function returned'), expiresAtMs: null };
  const { userId, expiresAtMs } = returned as { userId?: unknown; expiresAtMs?: unknown };
  const checked = userIdOf(userId, 'The `userId` the verify function returned');
  if (expiresAtMs === undefined) return { userId: checked, expiresAtMs: null };
  if (typeof expiresAtMs !== 'number' || !Number.isFinite(expiresAtMs)) {
    throw unauthorized('The `expiresAtMs` the verify function returned is not a number of milliseconds since the epoch.');
  }
  // Seconds mistaken for milliseconds land in January 1970: the date in the message shows it.
  if (expiresAtMs <= Date.now()) throw unauthorized(`The token has expired (the verify function says at ${new Date(expiresAtMs).toISOString()}); get a new one.`);
  return { userId: checked, expiresAtMs };
}

/** Builds the verifier for an auth setting; throws `argument/invalid` for a setting that would accept forged or foreign tokens. */
export function createVerifier(auth: SyncAuth): TokenVerifier {
  if ('verify' in auth) {
    return async (token) => {
      let returned: unknown;
      try {
        returned = await auth.verify(token);
      } catch (error) {
        throw unauthorized('The token was refused by the verify function.', error);
      }
      return verifiedOf(returned);
    };
  }
  let key: Promise<CryptoKey> | JWTVerifyGetKey;
  let options: Parameters<typeof jwtVerify>[2];
  // A token without `exp` would be valid forever, and its event stream would never end.
  const requiredClaims = ['exp'];
  if ('secret' in auth) {
    const secret = typeof auth.secret === 'string' ? new TextEncoder().encode(auth.secret) : auth.secret;
    if (secret.byteLength < 32) {
      throw new TabulaError('argument/invalid', `auth.secret must be at least 32 bytes for HS256; ${GENERATE_SECRET}.`);
    }
    const distinct = new Set(secret).size;
    if (secret.byteLength * Math.log2(distinct) < MIN_SECRET_BITS) {
      throw new TabulaError(
        'argument/invalid',
        `auth.secret can be guessed: its ${secret.byteLength} bytes use only ${distinct} distinct value${distinct === 1 ? '' : 's'}, as a placeholder or a repeated word does. Use 32 random bytes; ${GENERATE_SECRET}.`,
      );
    }
    // Imported once: given the raw bytes, jose imports the key again on every request (a third of a small request's CPU).
    key = crypto.subtle.importKey('raw', new Uint8Array(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    options = { algorithms: ['HS256'], clockTolerance: CLOCK_TOLERANCE_S, requiredClaims };
  } else {
    const { audience, issuer } = auth as { audience?: unknown; issuer?: unknown };
    if (typeof audience !== 'string' || audience === '') {
      throw new TabulaError(
        'argument/invalid',
        'auth.audience is required with auth.jwksUrl: an identity provider signs the tokens of all its apps with the same keys, so without it the server accepts tokens minted for any of them. Pass the `aud` your provider puts in tokens for this app.',
      );
    }
    if (issuer !== undefined && (typeof issuer !== 'string' || issuer === '')) {
      throw new TabulaError('argument/invalid', 'auth.issuer must be the `iss` of your provider\'s tokens (a non-empty string), or left out.');
    }
    key = createRemoteJWKSet(new URL(auth.jwksUrl));
    options = { clockTolerance: CLOCK_TOLERANCE_S, requiredClaims, audience, ...(issuer === undefined ? {} : { issuer }) };
  }
  return async (token) => {
    let payload: { sub?: unknown; exp?: unknown };
    try {
      // jwtVerify never accepts `alg: none` (unsecured JWTs need jose's UnsecuredJWT).
      const verified = typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, await key, options);
      payload = verified.payload;
    } catch (error) {
      throw unauthorized(describeJoseError(error), error);
    }
    if (payload.sub === undefined || payload.sub === '') throw unauthorized('The token has no `sub` claim; the server takes the user id from `sub`.');
    const userId = userIdOf(payload.sub, "The token's `sub`");
    // jose checked `exp` is a number; it accepts the token until `exp` plus the tolerance, and so does a stream.
    return { userId, expiresAtMs: ((payload.exp as number) + CLOCK_TOLERANCE_S) * 1000 };
  };
}

/** The token of an `Authorization: Bearer …` header; throws `sync/unauthorized` when there is none. */
export function bearerToken(header: string | null | undefined): string {
  const match = /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(header ?? '');
  if (!match?.[1]) throw unauthorized('Send the token as `Authorization: Bearer <JWT>`.');
  return match[1];
}
