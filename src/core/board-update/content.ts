/**
 * The ten content kinds an item of an update carries, read without building them: how far each runs in
 * the bytes, that what it holds decodes (JSON texts parse, `any` values decode, type refs name a shared
 * type), and its length as Yjs counts it. It does not say where an item may hold which kind (the
 * blackboard map's rules do) and never reads a ContentDoc, which the rules refuse before its content.
 */
import { skipAny } from './any.js';
import type { ByteReader } from './bytes.js';
import { malformed } from './problem.js';

/** The content kinds by ref (the low 5 bits of an item's info), for messages. */
export const CONTENT_NAMES = ['', 'ContentDeleted', 'ContentJSON', 'ContentBinary', 'ContentString', 'ContentEmbed', 'ContentFormat', 'ContentType', 'ContentAny', 'ContentDoc'] as const;
/** The ref of ContentDeleted. */
export const REF_DELETED = 1;
/** The ref of ContentAny. */
export const REF_ANY = 8;
/** The ref of ContentDoc, the highest. */
export const REF_DOC = 9;

/** Reads content `ref` (not ContentDoc) without building it; returns its length, as Yjs counts it. */
export function readContent(reader: ByteReader, ref: number): number {
  switch (ref) {
    case 1: // ContentDeleted
      return reader.uint('a deleted length');
    case 2: {
      // ContentJSON (written by Yjs before v13.5): each value a JSON text or "undefined".
      const count = reader.uint('a value count');
      for (let i = 0; i < count; i++) {
        const at = reader.pos;
        const text = reader.readString();
        if (text !== 'undefined') parseJson(text, at);
      }
      return count;
    }
    case 3: // ContentBinary
      reader.skip(reader.uint('a binary length'), 'binary content');
      return 1;
    case 4: // ContentString: its length is the string's in UTF-16 code units
      return reader.skipString();
    case 5: {
      // ContentEmbed
      const at = reader.pos;
      parseJson(reader.readString(), at);
      return 1;
    }
    case 6: {
      // ContentFormat: a key and a JSON value
      reader.skipString();
      const at = reader.pos;
      parseJson(reader.readString(), at);
      return 1;
    }
    case 7: {
      // ContentType: Y.Array, Y.Map, Y.Text, Y.XmlElement (+ node name), Y.XmlFragment, Y.XmlHook (+ name), Y.XmlText
      const at = reader.pos;
      const type = reader.uint('a type');
      if (type > 6) throw malformed(at, `type ${type}, which names no shared type`);
      if (type === 3 || type === 5) reader.skipString();
      return 1;
    }
    default: {
      // ContentAny
      const count = reader.uint('a value count');
      for (let i = 0; i < count; i++) skipAny(reader);
      return count;
    }
  }
}

/** Refuses the JSON text read at `at` unless it parses. */
function parseJson(text: string, at: number): void {
  try {
    JSON.parse(text);
  } catch {
    throw malformed(at, 'a JSON value that does not parse');
  }
}
