#!/usr/bin/env python3
"""Writes tests/data/tokenizer/corpus.json: the strings the tokenizer
cross-check encodes with k3ctl and with the real tiktoken (npm). Run it again
after editing; the JSON file is what the test reads (committed).

Only characters whose Unicode properties are the same in Unicode 14 (PCRE2
10.42) and 15 (Rust regex in @dqbd/tiktoken, ICU in node) appear here.
"""
import json
import os

S = []  # the corpus, in order


def add(*xs):
    S.extend(xs)


# --- Chinese, simplified and traditional, with punctuation and mixed ASCII ---
add("你好，世界！", "我们今天去北京吧。", "這是一個繁體中文的句子，包含標點符號。",
    "中文English混合text测试123个字", "深度学习模型（Transformer）在2017年提出。",
    "“引号”和‘单引号’以及《书名号》", "一二三四五六七八九十百千万亿",
    "人工智能正在改变世界，大型语言模型可以写代码、翻译和回答问题。",
    "𠀀𠀁𠀂 plane-2 ideographs 𪚥𫝀", "価格は¥1,500です。中国語：价格是1500元。")
# --- Japanese: kanji vs kana ---
add("日本語の文章です。", "ひらがなだけのぶんしょう", "カタカナダケノブンショウ",
    "漢字とひらがなとカタカナが混ざった文章。", "東京タワーは333メートルです。",
    "人々は時々々を使う", "〆切は明日です", "ラーメンとコーヒー、ちょっと待ってー！",
    "ｈａｌｆ ｗｉｄｔｈ ｶﾀｶﾅ ﾃｽﾄ", "私はAIエンジニアです。I'm an engineer.")
# --- Korean, Arabic, Hebrew, Hindi, Thai, Cyrillic, Greek ---
add("안녕하세요, 세계! 한국어 문장입니다.", "대한민국의 수도는 서울입니다 123",
    "مرحبا بالعالم! هذه جملة عربية.", "العدد ١٢٣٤٥ بالأرقام العربية الهندية",
    "שָׁלוֹם עוֹלָם, זה משפט בעברית", "नमस्ते दुनिया! यह हिंदी वाक्य है।",
    "संख्या १२३४ देवनागरी अंकों में", "สวัสดีชาวโลก นี่คือประโยคภาษาไทย",
    "Привет, мир! Это русское предложение.", "Γειά σου Κόσμε! ΑΥΤΗ ΕΙΝΑΙ ΕΛΛΗΝΙΚΑ",
    "Ünïcödé çàsé tèst: Straße, ÆØÅ, ǅemal (titlecase ǅ)", "e\u0301 vs é, n\u0303 vs ñ, a\u0308\u0304")
# --- emoji, ZWJ sequences, flags, skin tones, keycaps ---
add("😀😃😄😁", "👨‍👩‍👧‍👦 family", "👩🏽‍💻 coding", "🏳️‍🌈 and 🏴‍☠️",
    "🇫🇷🇩🇪🇯🇵🇺🇸 flags", "1️⃣2️⃣#️⃣ keycaps", "I ❤️ NY", "👍🏻👍🏼👍🏽👍🏾👍🏿",
    "text😀text", "🧑‍🤝‍🧑 together ✨✨✨", "❤\ufe0f\u200d🔥 heart on fire")
# --- newlines: CRLF, mixed, lone CR ---
add("line1\r\nline2\r\nline3", "a\nb\r\nc\rd\n\re", "\r\n\r\n\r\n", "end with CRLF\r\n",
    "trailing spaces   \nnext", "tabs\t\n\tindented", "\n\n\nthree newlines first",
    "para one.\n\npara two.\n\n\n\npara three.", " \n \n \n", "x\u2028y\u2029z", "a\u0085b")
# --- runs of spaces and tabs, other white space ---
for n in (1, 2, 3, 4, 5, 8, 16, 33):
    add(" " * n, "a" + " " * n + "b")
add("\t", "\t\t\t", " \t \t ", "a\t\tb", "  leading", "trailing  ", "\u00a0nbsp\u00a0",
    "ideographic\u3000space", "thin\u2009space", "\u200bzero width", "\ufeffBOM")
# --- contractions, both cases ---
for w in ("it's", "IT'S", "It'S", "we'll", "WE'LL", "they'd", "THEY'D", "I'm", "I'M",
          "you're", "YOU'RE", "You'Re", "we've", "WE'VE", "don't", "DON'T", "Don'T"):
    add(f"{w} fine", f"Yes {w}!")
add("'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'VE 'M 'LL 'D", "rock'n'roll o'clock",
    "it’s curly", "x'sy x'Sy", "l'homme d'État")
# --- digits of every length, and other number systems ---
for n in range(1, 41):
    add("".join(str((i * 7 + n) % 10) for i in range(n)))
add("1,234,567.89", "3.14159265358979", "-42 +17 1e10 0x1F 0b1010", "２０２４年１２月",
    "x² + y³ = z⁴", "Ⅻ Ⅳ ⅷ roman", "٠١٢٣٤٥٦٧٨٩", "½ ¾ ⅓")
# --- code ---
add('int main() {\n  std::printf("%d\\n", 42);\n  return 0;\n}\n',
    "def f(x):\n    return [i**2 for i in range(x) if i % 2 == 0]\n",
    "const add = (a, b) => a + b; // arrow\nexport default add;",
    '{"name": "k3", "values": [1, 2.5, null, true], "nested": {"a": {"b": []}}}',
    "for f in *.txt; do wc -l \"$f\" | awk '{print $1}'; done",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "<div class=\"x\"><a href='/a/b?c=d&e=f'>link</a></div>",
    r"^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\w+\.\w{2,}$",
    "    if (x != nullptr && *x >= 0) { ++count; }",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "a=b;c=d;;e==f!==g<=>h->i=>j::k", "#include <vector>\n#define MAX(a,b) ((a)>(b)?(a):(b))")
# --- URLs, paths, e-mail ---
add("https://example.com/path/to/page?query=1&b=two#frag",
    "http://user:pass@host.example.org:8080/a/b/c/", "ftp://files.example.net/pub//x//",
    "/usr/local/bin/k3ctl --model /tmp/m", "C:\\Users\\name\\file.txt",
    "mailto:someone@example.com", "see https://例え.jp/パス and www.example.com/a_b-c.d")
# --- special-token look-alikes: ordinary text here ---
add("<|endoftext|>", "<|open|>message role=\"user\"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>",
    "[BOS] [EOS] <|reserved_token_5|>", "<|endofprompt|> text")
# --- odd characters ---
add("", "a", "Z", "\u0000\u0001\u001f", "\u007f", "\u0301 lone combining", "\u200d",
    "\ue000 private use", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝟙𝟚𝟛", "𐍈 gothic", "!!!???...", "—–-", "¡¿", "©®™",
    "ÀÉÎÕÜ àéîõü", "ŁÓDŹ łódź", "İstanbul ıi", "ß ẞ", "ﬁ ligature")
# --- mixed paragraphs ---
add("The 2024 report (p. 17) says: \"GDP grew 3.2%\", didn't it? Yes—it DID.\r\n",
    "混合: English, 中文, 日本語, 한국어, العربية, हिन्दी, 😀 — all in 1 line!",
    "Price: $1,299.99 (≈ €1.200) — save 15% today!!! Call +1-800-555-0199.",
    "Q: What's 2+2?\nA: It's 4.\n\nQ: WHAT'S 10*10?\nA: IT'S 100.")
# --- long inputs ---
add("The quick brown fox jumps over the lazy dog. " * 400,
    "人工智能" * 1500,
    " " * 1000 + "x",
    "a" * 5000,
    "1234567890" * 100,
    "😀" * 500,
    "!" * 1000,
    "ab" * 2000 + "\n" * 50,
    "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 100,
    ("Lorem ipsum dolor sit amet, 消费者 consectetur 😀 adipiscing elit, sed do eiusmod "
     "tempor incididunt ut labore et dolore magna aliqua.\r\n\t") * 120)

assert len(S) >= 200, len(S)
path = os.path.join(os.path.dirname(__file__), "..", "..", "data", "tokenizer", "corpus.json")
with open(path, "w", encoding="utf-8") as f:
    json.dump(S, f, ensure_ascii=False, indent=0)
    f.write("\n")
print(f"{len(S)} strings, {sum(len(s.encode()) for s in S)} bytes -> {os.path.normpath(path)}")
