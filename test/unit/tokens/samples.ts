/** A fixed sample set for counting tests: English, code, non-Latin scripts, emoji, special-token text, empty. */
export const SAMPLES: Record<string, string> = {
  english: 'The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.',
  code: 'export function add(a: number, b: number): number {\n  return a + b; // sum\n}\n\nconst xs = [1, 2, 3].map((x) => x * 2);\n',
  chinese: '今天天气很好，我们去公园散步吧。人工智能正在改变世界。',
  japanese: '吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。',
  korean: '안녕하세요. 오늘은 날씨가 좋네요. 한국어 토큰 수를 세어 봅니다.',
  arabic: 'مرحبا بالعالم، هذا نص تجريبي لعد الرموز.',
  emoji: '🚀🔥 Launch day! 👩‍💻👨‍👩‍👧‍👦 🇺🇳 ✨✨✨',
  special: 'User text that mentions <|endoftext|> and <|im_start|> must be counted as plain text.',
  whitespace: '   \n\n\t  indented\n    more\n',
  empty: '',
};
