// Fails fast, before any test starts, when no Chromium is installed.
import { missingChromiumMessage } from './chromium.mjs';

const message = missingChromiumMessage();
if (message) {
  console.error(message);
  process.exit(1);
}
