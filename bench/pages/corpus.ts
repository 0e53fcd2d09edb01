/**
 * Seeded generators of English-like prose and TypeScript-like code for the
 * token benchmarks: varied enough that no single phrase dominates, so the
 * tokenizer's merge cache helps about as much as it does on real text.
 */
const WORDS = (
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her ' +
  'she there been one all we their has would when if so no will more can about out up them some could into time only new ' +
  'other than then now its also two may first after like over such our most even made through where many before must well ' +
  'back years much should between each own because while under never same another know against during without place around ' +
  'however home small found thought went say part once general high upon school every does got united left number course war ' +
  'until always away something fact though water less public put think almost hand enough far took head yet government system ' +
  'better set told nothing night end why called didnt eyes find going look asked later knew point next program city business ' +
  'give group toward young days let room president side social given present several order national possible rather second face ' +
  'per among form important often things looked early white case john become large big need four within felt along children saw ' +
  'best church ever least power development light thing seemed family interest want members mind country area others done turned'
).split(' ');

const IDENTIFIERS = 'user session message count total index value result config options buffer stream token cache store query item list map key state event handler request response error'.split(' ');

function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function english(chars: number, seed: number): string {
  const next = random(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)] as T;
  const parts: string[] = [];
  let length = 0;
  while (length < chars) {
    const words = Array.from({ length: 6 + Math.floor(next() * 14) }, () => pick(WORDS));
    let sentence = words.join(' ');
    sentence = `${sentence[0]?.toUpperCase() ?? ''}${sentence.slice(1)}${pick(['.', '.', '.', '?', '!'])}`;
    if (next() < 0.1) sentence += ` ${Math.floor(next() * 10_000)}`;
    const piece = next() < 0.15 ? `${sentence}\n\n` : `${sentence} `;
    parts.push(piece);
    length += piece.length;
  }
  return parts.join('').slice(0, chars);
}

export function code(chars: number, seed: number): string {
  const next = random(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)] as T;
  const name = () => `${pick(IDENTIFIERS)}${pick(['', 'Id', 'List', 'Count', String(Math.floor(next() * 100))])}`;
  const lines: string[] = [];
  let length = 0;
  while (length < chars) {
    const fn = `function ${name()}(${name()}: number, ${name()}: string): ${pick(['number', 'string', 'boolean'])} {`;
    const body = Array.from({ length: 2 + Math.floor(next() * 6) }, () =>
      pick([
        `  const ${name()} = ${name()}.${name()}(${name()}, ${Math.floor(next() * 1000)});`,
        `  if (${name()} > ${Math.floor(next() * 50)}) return ${name()};`,
        `  // ${pick(WORDS)} ${pick(WORDS)} ${pick(WORDS)}`,
        `  ${name()}.push({ ${name()}: ${name()}, ${name()}: '${pick(WORDS)}' });`,
      ]),
    );
    const block = [fn, ...body, '}', ''].join('\n') + '\n';
    lines.push(block);
    length += block.length;
  }
  return lines.join('').slice(0, chars);
}
