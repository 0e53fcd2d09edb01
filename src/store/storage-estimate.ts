/**
 * The origin's storage as the browser reports it (`tabula.storage()`), and
 * the request to keep it under storage pressure
 * (`tabula.requestPersistence()`). Where the StorageManager API is missing
 * (Node, some WebViews) they report nothing rather than fail.
 */

export interface StorageEstimate {
  /** Bytes this origin uses. */
  usage: number;
  /** Bytes this origin may use. */
  quota: number;
  /** Whether the browser promised not to evict this origin's data. */
  persisted: boolean;
}

/** Storage use of this origin (zeros where the StorageManager API is missing). */
export async function storageEstimate(): Promise<StorageEstimate> {
  const manager = typeof navigator === 'object' ? navigator.storage : undefined;
  if (!manager?.estimate) return { usage: 0, quota: 0, persisted: false };
  const [estimate, persisted] = await Promise.all([manager.estimate(), manager.persisted ? manager.persisted() : Promise.resolve(false)]);
  return { usage: estimate.usage ?? 0, quota: estimate.quota ?? 0, persisted };
}

/** Asks the browser to keep this origin's data under storage pressure; false where unsupported or refused. */
export async function requestPersistence(): Promise<boolean> {
  const manager = typeof navigator === 'object' ? navigator.storage : undefined;
  if (!manager?.persist) return false;
  try {
    return await manager.persist();
  } catch {
    return false;
  }
}
