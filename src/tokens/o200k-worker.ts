/**
 * The token worker for o200k_base, as a dedicated Worker or a SharedWorker.
 * It imports its encoding statically, so a bundler puts exactly this
 * encoding in this worker file, also with Vite's default iife worker format
 * (which inlines every module a dynamic import could reach).
 */
import * as encoding from 'gpt-tokenizer/encoding/o200k_base';
import { serve } from './serve.js';

serve({ o200k_base: () => Promise.resolve(encoding) });
