/**
 * Who is asking: turns the `Authorization: Bearer <JWT>` header into a user
 * id with jose. The user is the token's `sub` and nothing else. Any failure
 * (no token, bad signature, expired, not yet valid, `alg: none`, no `sub`)
 * is one `sync/unauthorized`; the reason goes in the message, never a hint
 * about other users.
 */
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { TabulaError } from '../core/errors.js';

/** How the server checks tokens. */
export type SyncAuth =
  /** HS256 with a shared secret: for development and single-tenant setups. */
  | { readonly secret: string | Uint8Array }
  /** Tokens signed by an identity provider, keys fetched from its JWKS endpoint. */
  | { readonly jwksUrl: string; readonly issuer?: string; readonly audience?: string }
  /** Your own check: return the user id or throw. */
  | { readonly verify: (token: string) => string | Promise<string> };

/** Checks a bearer token and returns its user id; throws `sync/unauthorized`. */
export type TokenVerifier = (token: string) => Promise<string>;

const MAX_USER_ID = 256;
// A clock skew allowance between the issuer and this server.
const CLOCK_TOLERANCE_S = 5;

function unauthorized(message: string, cause?: unknown): TabulaError {
  return new TabulaError('sync/unauthorized', message, cause === undefined ? {} : { cause });
}

function userOf(sub: unknown): string {
  if (typeof sub !== 'string' || sub === '') throw unauthorized('The token has no `sub` claim; the server takes the user id from `sub`.');
  if (sub.length > MAX_USER_ID) throw unauthorized(`The token's \`sub\` is longer than ${MAX_USER_ID} characters.`);
  return sub;
}

function describeJoseError(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return 'The token has expired; get a new one.';
  if (error instanceof joseErrors.JWTClaimValidationFailed) return `The token's \`${error.claim}\` claim is not acceptable (${error.reason}).`;
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'The token signature does not verify.';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'The token is signed with an algorithm this server does not accept.';
  return 'The token is not a valid JWT.';
}

/** Builds the verifier for an auth setting. */
export function createVerifier(auth: SyncAuth): TokenVerifier {
  if ('verify' in auth) {
    return async (token) => {
      let user: unknown;
      try {
        user = await auth.verify(token);
      } catch (error) {
        throw unauthorized('The token was refused by the verify function.', error);
      }
      return userOf(user);
    };
  }
  let key: Promise<CryptoKey> | JWTVerifyGetKey;
  let options: Parameters<typeof jwtVerify>[2];
  if ('secret' in auth) {
    const secret = typeof auth.secret === 'string' ? new TextEncoder().encode(auth.secret) : auth.secret;
    if (secret.byteLength < 32) {
      throw new TabulaError('argument/invalid', 'auth.secret must be at least 32 bytes for HS256; generate one with `openssl rand -base64 32`.');
    }
    // Imported once: given the raw bytes, jose imports the key again on every request (a third of a small request's CPU).
    key = crypto.subtle.importKey('raw', new Uint8Array(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
    options = { algorithms: ['HS256'], clockTolerance: CLOCK_TOLERANCE_S };
  } else {
    key = createRemoteJWKSet(new URL(auth.jwksUrl));
    options = {
      clockTolerance: CLOCK_TOLERANCE_S,
      ...(auth.issuer === undefined ? {} : { issuer: auth.issuer }),
      ...(auth.audience === undefined ? {} : { audience: auth.audience }),
    };
  }
  return async (token) => {
    let sub: unknown;
    try {
      // jwtVerify never accepts `alg: none` (unsecured JWTs need jose's UnsecuredJWT).
      const verified = typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, await key, options);
      sub = verified.payload.sub;
    } catch (error) {
      throw unauthorized(describeJoseError(error), error);
    }
    return userOf(sub);
  };
}

/** The token of an `Authorization: Bearer …` header; throws `sync/unauthorized` when there is none. */
export function bearerToken(header: string | null | undefined): string {
  const match = /^Bearer[ ]+([^ ]+)[ ]*$/i.exec(header ?? '');
  if (!match?.[1]) throw unauthorized('Send the token as `Authorization: Bearer <JWT>`.');
  return match[1];
}
