#!/usr/bin/env python3
"""Writes the tokenizer test corpus: a few thousand varied texts, the same
bytes on every run (a fixed seed, no dependence on the machine).

Each record is "<byte count>\n<bytes>\n", so that a text may hold newlines,
tabs and carriage returns. Usage: make_corpus.py OUT [COUNT]"""
import random
import sys
import unicodedata

WORDS = {
    "en": "the quick brown fox jumps over the lazy dog while it's raining and they're "
          "sure we've seen I'm sure you'll find he'd said THE DOG'S BALL isn't HERE "
          "tokenizer compiler runtime kernel tensor graph memory arena schedule".split(),
    "latin": "café naïve résumé façade Ærøskøbing Zürich straße fiancée São Paulo "
             "déjà vu señor año mañana Łódź Dvořák İstanbul ğüşöç Ångström œuvre".split(),
    "cyrillic": "Привет мир как дела съешь же ещё этих мягких французских булок "
                "да выпей чаю Москва Київ Україна Беларусь ЁЛКА".split(),
    "greek": "Καλημέρα κόσμε ξεσκεπάζω την ψυχοφθόρα βδελυγμία Ελλάδα ΑΘΗΝΑ "
             "φιλοσοφία λόγος ἀρχή".split(),
    "cjk": "你好 世界 我们 正在 测试 分词器 中文 汉字 東京 日本語 ひらがな カタカナ "
           "こんにちは ありがとう 한국어 안녕하세요 감사합니다 서울".split(),
    "arabic": "مرحبا بالعالم اللغة العربية كتاب مدرسة السلام عليكم شكرا".split(),
    "hindi": "नमस्ते दुनिया हिन्दी भाषा क्षत्रिय विद्यालय धन्यवाद प्रोग्रामिंग".split(),
    "other": "สวัสดี ภาษาไทย שלום עולם Γειά ሰላም ᏣᎳᎩ ꦲꦏ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝 ｆｕｌｌｗｉｄｔｈ".split(),
    "emoji": ["😀", "😂", "👍", "👍🏽", "❤️", "🔥", "🚀", "🇫🇷", "🇯🇵", "👨‍👩‍👧‍👦",
              "🧑🏾‍💻", "👩‍❤️‍👨", "🏳️‍🌈", "✨", "🙂🙃", "☕", "🤖", "🎉🎊", "1️⃣", "©️"],
}
PUNCT = list(".,;:!?-–—…'\"()[]{}<>/\\|@#$%^&*_+=~`«»“”‘’¿¡§¶°•·")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>",
           "<|begin_of_text|>", "<|eot_id|>", "<think>", "</think>"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'D"]
WS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "    ", "\u00a0", "\u3000",
      " \t ", "\n    ", "\n\t"]

CODE = [
    "int main(int argc, char **argv) {\n    return 0;\n}",
    "for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];",
    "def encode(self, text: str) -> list[int]:\n        return [self.vocab[t] for t in text.split()]",
    "const x = await fetch(`https://example.com/api?id=${id}&q=${encodeURIComponent(q)}`);",
    "    if (err != RLX_OK) { fprintf(stderr, \"%s\\n\", rlx_last_error()); return 1; }",
    "SELECT name, COUNT(*) AS n FROM users WHERE age >= 18 GROUP BY name ORDER BY n DESC;",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))",
    "x = np.zeros((3, 4), dtype=np.float32); y = x @ x.T  # shape (3, 3)",
    "fn main() { let v: Vec<u8> = vec![0xde, 0xad, 0xbe, 0xef]; println!(\"{:?}\", v); }",
    "<div class=\"row\"><span id='a1'>&nbsp;&lt;tag&gt;</span></div>",
    "{\"key\": [1, 2.5e-3, -7, null, true], \"nested\": {\"a\": \"b\"}}",
    "\tmov eax, [ebp+8]\n\tadd eax, 0x1F\n\tret",
    "git commit -m 'fix: handle \\r\\n line endings' && git push origin HEAD:main",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;k&&l||!m",
    "if __name__ == \"__main__\":\n    main()\n",
]


def number(r):
    k = r.randrange(6)
    if k == 0:
        return str(r.randrange(10))
    if k == 1:
        return str(r.randrange(10 ** r.randrange(2, 25)))
    if k == 2:
        return f"{r.uniform(-1e6, 1e6):.{r.randrange(1, 8)}f}"
    if k == 3:
        return f"{r.randrange(1, 10)}.{r.randrange(10**6)}e{r.choice('+-')}{r.randrange(40)}"
    if k == 4:
        return "-".join(str(r.randrange(10 ** r.randrange(1, 5))) for _ in range(r.randrange(2, 5)))
    return f"{r.randrange(1, 10 ** 6):,}"


def fragment(r):
    k = r.randrange(14)
    if k < 6:
        lang = r.choice(list(WORDS))
        return " ".join(r.choice(WORDS[lang]) for _ in range(r.randrange(1, 8)))
    if k == 6:
        return number(r)
    if k == 7:
        return "".join(r.choice(PUNCT) for _ in range(r.randrange(1, 6)))
    if k == 8:
        return r.choice(WORDS["en"]) + r.choice(CONTRACTIONS)
    if k == 9:
        return r.choice(WS) * r.randrange(1, 4)
    if k == 10:
        return r.choice(CODE)
    if k == 11:
        return "".join(r.choice(WORDS["emoji"]) for _ in range(r.randrange(1, 5)))
    if k == 12:
        return r.choice(SPECIAL)
    # a word glued to punctuation, digits or another script
    return r.choice(WORDS[r.choice(list(WORDS))]) + r.choice(PUNCT + ["", "123", "_x", "😀"]) + \
        r.choice(WORDS[r.choice(list(WORDS))])


def text(r):
    n = r.randrange(1, 9)
    parts = [fragment(r) for _ in range(n)]
    seps = [r.choice([" ", " ", " ", "", "\n", "  ", "\t", ", ", ". "]) for _ in range(n - 1)]
    out = parts[0]
    for s, p in zip(seps, parts[1:]):
        out += s + p
    k = r.randrange(10)
    if k == 0:
        out = " " + out
    elif k == 1:
        out = out + r.choice(WS)
    elif k == 2:
        out = r.choice(WS) * 2 + out
    return out


def fixed():
    """Hand-picked texts first: edge cases every tokenizer must get right."""
    yield from ["", " ", "  ", "\n", "\t", "\r\n", "a", "A", "Hello", " Hello", "Hello world",
                "hello  world", "hello   world ", "   leading", "trailing   ", "\n\n\n",
                "it's", "IT'S", "we'd've", "don't stop", "the cat's  hat",
                "1", "12", "123", "1234", "12345678901234567890", "3.14159", "1,000,000",
                "$100.00", "v1.2.3", "x=1+2", "a\tb\tc", "line1\nline2\r\nline3",
                "<|endoftext|>", "Hello<|endoftext|>world", "<s>Hello</s>", " <s> Hello </s> ",
                "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|>Hi<|eot_id|>", "<think>ok</think>",
                "<|endoftext", "<s", "</", "<|", "|>",
                "😀", "👨‍👩‍👧‍👦", "🇫🇷🇯🇵", "🧑🏾‍💻 coding", "e\u0301", "Cafe\u0301 na\u0308ive",
                "日本語のテキスト", "中文分词测试", "Ωμέγα", "Ёжик", "ﬁ ﬂ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
                "\u200b\u200c\u200d", "a\u00a0b", "a\u3000b", "tab\t\tend", " " * 40, "\t" * 9,
                "-" * 30, "=" * 17 + ">", "....", "!!!???", "'''", '"""', "```python",
                "a" * 200, "ab" * 150, "😀" * 30, "9" * 100, "\n" * 12 + "x",
                # characters some regex engines count as whitespace and others not
                "a\u0085b", "a \u0085 b", "x\ufeffy", " \ufeff z", "a\u180eb", "a\u200bb", "a\u2028b",
                "a\u00a0\u00a0b", "a\u3000 b", "1\u00a0000", "a \u2009 b", "ab\u000bcd", "x\u001cy\u001f",
                "\u0000nul\u0000", "\x7f\u0080\u009f"]
    for w in CODE:
        yield w
    for lang, ws in WORDS.items():
        yield " ".join(ws)


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    r = random.Random(20261204)
    texts = list(fixed())
    while len(texts) < count:
        texts.append(text(r))
    # Decomposed accents only where written on purpose (the "e\u0301" cases):
    # the random texts are NFC, as text usually is.
    texts = texts[:len(list(fixed()))] + [unicodedata.normalize("NFC", t) for t in texts[len(list(fixed())):]]
    with open(out, "wb") as f:
        for t in texts:
            b = t.encode("utf-8")
            f.write(b"%d\n" % len(b) + b + b"\n")


if __name__ == "__main__":
    main()
