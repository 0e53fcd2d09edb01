/**
 * The one way the core tests take a refusal apart: the TabulaError a synchronous call throws. Any other
 * error is rethrown as it is, and a call that returns fails the test, so an assertion on the result's code
 * or message can only pass for a real TabulaError.
 */
import { TabulaError } from '../../../src/core/index.js';

/** The TabulaError `run` throws (synchronously), or a failure when it returns or throws something else. */
export function refusal(run: () => unknown): TabulaError {
  try {
    run();
  } catch (error) {
    if (error instanceof TabulaError) return error;
    throw error;
  }
  throw new Error('expected a TabulaError');
}
