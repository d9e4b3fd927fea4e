#!/usr/bin/env python3
"""Reference data for the WordPiece and Unigram tokenizers (test_tokenizer's
EmbedVocab tests): small vocabularies trained here, written both as
tokenizer.json and as GGUF, and the token ids the reference libraries give
for fixed strings and 10,000 random Unicode strings.

  python3 tests/data/tokenizers/make_embed_vocabs.py OUTDIR

Needs PyPI tokenizers, sentencepiece (with protobuf) and gguf. Deterministic
for given library versions (recorded in OUTDIR/manifest.json). References:
- WordPiece (tokenizer.json and GGUF "bert"): Hugging Face `tokenizers`.
- Unigram, tokenizer.json form (the pipeline transformers writes for
  XLM-RoBERTa: Precompiled + Replace " {2,}" + Metaspace): `tokenizers`.
- Unigram, GGUF form ("t5", what llama.cpp reads): `sentencepiece` itself,
  whose model the vocabulary is.
"""
import json
import os
import random
import sys
import unicodedata

# One thread: the trainers' ties then break the same way every run.
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"

import gguf  # noqa: E402
import sentencepiece as spm  # noqa: E402
import tokenizers  # noqa: E402
from sentencepiece import sentencepiece_model_pb2 as spm_pb2  # noqa: E402
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

N_RANDOM = 10000
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# ------------------------------------------------------------------ corpus
SYLLABLES = {
    "latin": "ba be bi bo bu ca ce ci co da de di do fa fe fi ga ge gi la le li lo ma me mi mo na ne ni no "
             "pa pe pi po ra re ri ro sa se si so ta te ti to va ve vi wa we xa za ze th sh ch qu ing ion er "
             "ée è ê ë à â ä ô ö ü ù ç ñ ß ø å æ",
    "cyrillic": "ба бе би бо ва ве ви да де ди ка ко ку ла ле ли ма ме ми на не ни по ра ре ри са се си та те ти ый ой ия",
    "greek": "κα κε κι κο λα λε λι μα με μι να νε νι πα πε πι σα σε σι τα τε τι ος ης ων ά έ ί ό ύ",
    "arabic": "ال با بي تا تي سا سي كا كي لا لي ما مي نا ني وا وي",
    "devanagari": "क कि की कु ग गा त ता ति न ना नि म मा मि र रा रि स सा सि ह हा",
    "hangul": "가 나 다 라 마 바 사 아 자 차 카 타 파 하 한 국 어 는 을 를 이 가",
    "cjk": "中 文 字 符 日 本 語 人 大 小 上 下 山 川 水 火 木 金 土 学 生 国 家",
    "kana": "あ い う え お か き く け こ さ し す せ そ ア イ ウ エ オ カ キ ク ケ コ",
    "thai": "กา ขา คา งา จา ฉา ชา ซา ดา ตา ทา นา บา ปา",
}


def make_corpus(rng):
    lines = []
    english = ("the quick brown fox jumps over the lazy dog . hello world ! tokenizers split words into "
               "pieces , and unknown words become [UNK] . can't won't it's 1234 5678 3.14 $100 50% "
               "email@example.com https://example.org/path?q=1 (parentheses) [brackets] {braces} "
               "Running runner runs ran embeddings rerank retrieval documents query passage").split()
    for _ in range(4000):
        words = []
        for _ in range(rng.randint(3, 14)):
            script = rng.choice(list(SYLLABLES) + ["english"] * 4)
            if script == "english":
                w = rng.choice(english)
                if rng.random() < 0.2:
                    w = w.capitalize()
            else:
                syl = SYLLABLES[script].split()
                w = "".join(rng.choice(syl) for _ in range(rng.randint(1, 4)))
            words.append(w)
        lines.append(" ".join(words))
    return lines


# -------------------------------------------------------- random strings
def assigned_blocks():
    blocks = [
        (0x20, 0x7E, 30), (0xA0, 0xFF, 6), (0x100, 0x24F, 6), (0x300, 0x36F, 8), (0x370, 0x3FF, 3),
        (0x400, 0x4FF, 3), (0x483, 0x489, 1), (0x531, 0x58A, 1), (0x591, 0x5F4, 2), (0x600, 0x6FF, 3),
        (0x900, 0x97F, 3), (0xE00, 0xE5B, 2), (0x10A0, 0x10FF, 1), (0x1100, 0x11FF, 2), (0x1AB0, 0x1ABE, 1),
        (0x1E00, 0x1EFF, 2), (0x2000, 0x206F, 3), (0x2070, 0x209F, 1), (0x20A0, 0x20C0, 1), (0x20D0, 0x20F0, 2),
        (0x2100, 0x218B, 2), (0x2190, 0x23FF, 1), (0x2460, 0x24FF, 2), (0x2600, 0x27BF, 2), (0x3000, 0x303F, 2),
        (0x3040, 0x30FF, 3), (0x3200, 0x33FF, 2), (0x3400, 0x4DBF, 1), (0x4E00, 0x9FFF, 5), (0xAC00, 0xD7A3, 3),
        (0xE000, 0xE0FF, 1), (0xF900, 0xFAFF, 1), (0xFB00, 0xFB4F, 2), (0xFE00, 0xFE0F, 1), (0xFE20, 0xFE2F, 1),
        (0xFE30, 0xFE6F, 1), (0xFF01, 0xFFEE, 4), (0xFFF9, 0xFFFD, 1), (0x1D400, 0x1D7FF, 2), (0x1F1E6, 0x1F1FF, 2),
        (0x1F300, 0x1F6FF, 4), (0x1F900, 0x1F9FF, 2), (0x1F3FB, 0x1F3FF, 1), (0x20000, 0x2A6DF, 1),
        (0xE0020, 0xE007F, 1), (0x0, 0x1F, 3), (0x7F, 0x9F, 1), (0x378, 0x37F, 1), (0x2FFFE, 0x2FFFF, 1),
    ]
    return blocks


def unicode_version_differences():
    """Code points where tokenizers' Unicode tables (older than Python's)
    disagree with Unicode 14 about BERT's normalization or punctuation: the
    random strings avoid them (a table-version difference, not an
    algorithm one; test_tokenizer's tables are Unicode 14)."""
    norm = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=True, lowercase=True)
    pre = pre_tokenizers.BertPreTokenizer()

    def cjk(cp):
        return any(a <= cp <= b for a, b in [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                             (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF),
                                             (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)])

    def expected_norm(c):
        cp, cat = ord(c), unicodedata.category(c)
        if cp in (0, 0xFFFD) or (cat[0] == "C" and cat != "Cn" and c not in "\t\n\r"):
            return ""
        if c in "\t\n\r" or cat[0] == "Z":
            return " "
        s = " %s " % c if cjk(cp) else c
        s = "".join(x for x in unicodedata.normalize("NFD", s) if unicodedata.category(x) != "Mn")
        return "".join(x.lower() for x in s)

    bad = set()
    for a, b, _ in assigned_blocks():
        for cp in range(a, b + 1):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            c = chr(cp)
            if norm.normalize_str(c) != expected_norm(c):
                bad.add(cp)
                continue
            cat = unicodedata.category(c)
            if cat[0] in "CZ" or c.isspace():
                continue
            punct = cat[0] == "P" or (cp < 0x80 and cat[0] in "PS")
            got = [p for p, _ in pre.pre_tokenize_str("a%sa" % c)]
            if got != (["a", c, "a"] if punct else ["a%sa" % c]):
                bad.add(cp)
    return bad


def random_strings(rng, corpus, bad):
    blocks = assigned_blocks()
    weights = [w for _, _, w in blocks]
    words = " ".join(corpus[:500]).split()
    spaces = [" ", "  ", "   ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2003", "\u2028", " \n "]
    out = []
    while len(out) < N_RANDOM:
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.35:
                parts.append(rng.choice(words))
            elif r < 0.5:
                parts.append(rng.choice(spaces))
            else:
                for _ in range(rng.randint(1, 4)):
                    a, b, _ = rng.choices(blocks, weights)[0]
                    cp = rng.randint(a, b)
                    if 0xD800 <= cp <= 0xDFFF or cp in bad:
                        continue
                    parts.append(chr(cp))
        s = "".join(parts)
        if any(t in s for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>", "<unk>", "<pad>")):
            continue
        out.append(s)
    return out


def fixed_strings():
    with open(os.path.join(os.path.dirname(__file__), "..", "tokenizer-tests", "ggml-vocab-bert-bge.gguf.inp"),
              encoding="utf-8") as f:
        inp = f.read().split("\n__ggml_vocab_test__\n")[:-1]
    extra = [
        "Héllo Wörld ÀÉÎÕÜ ñ ç", "İstanbul ΣΊΣΥΦΟΣ", "中文字符 and 日本語", "한국어 텍스트", "a\u0301 e\u0301 o\u0308",
        "ＡＢＣ１２３ ﬁﬂ ℌ ⅻ ①", "👨\u200d👩\u200d👧 🇯🇵 👍🏽 ❤\ufe0f", "  leading and trailing  ", "\u3000wide\u3000space",
        "tab\tnew\nline\r\nend", "ctrl\x00\x01\x7f\u200b\ufeffchars", "x" * 150, "a" + "\u0301" * 10,
        "don't stop-believing... (really?) [yes] {no} $5 #1 @me", "\ufffd replacement", "", " ", "\x01",
        "\u200b", "\x01\u200b\x02", "\u2581", "a\u2581", "\u2581\u2581b  ",
    ]
    return inp + extra


# --------------------------------------------------------------- WordPiece
def train_wordpiece(corpus, lowercase):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                strip_accents=None, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(vocab_size=3000, special_tokens=SPECIALS))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def write_wordpiece_gguf(tok, path):
    """As llama.cpp's converter writes BERT vocabularies."""
    vocab = tok.get_vocab()
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    tokens, types = [], []
    for t, _ in by_id:
        if t in SPECIALS:
            tokens.append(t)
            types.append(gguf.TokenType.CONTROL)
        elif t.startswith("##"):
            tokens.append(t[2:])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append("\u2581" + t)
            types.append(gguf.TokenType.NORMAL)
    w = gguf.GGUFWriter(path, "bert")
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_unk_token_id(vocab["[UNK]"])
    w.add_pad_token_id(vocab["[PAD]"])
    w.add_sep_token_id(vocab["[SEP]"])
    w.add_mask_token_id(vocab["[MASK]"])
    w.add_uint32("tokenizer.ggml.cls_token_id", vocab["[CLS]"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


# ----------------------------------------------------------------- Unigram
def train_unigram(corpus, outdir, name, byte_fallback):
    prefix = os.path.join(outdir, name)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_prefix=prefix, model_type="unigram",
                                   vocab_size=2000, normalization_rule_name="nmt_nfkc", byte_fallback=byte_fallback,
                                   character_coverage=0.995, num_threads=1, seed_sentencepiece_size=100000,
                                   unk_id=3, bos_id=0, eos_id=2, pad_id=1, minloglevel=2)
    proto = spm_pb2.ModelProto()
    with open(prefix + ".model", "rb") as f:
        proto.ParseFromString(f.read())
    return spm.SentencePieceProcessor(model_file=prefix + ".model"), proto


def unigram_tokenizer_json(proto):
    """transformers' XLM-RoBERTa conversion of a SentencePiece model."""
    vocab = [(p.piece, p.score) for p in proto.pieces]
    byte_fallback = proto.trainer_spec.byte_fallback
    tok = Tokenizer(models.Unigram(vocab, unk_id=proto.trainer_spec.unk_id, byte_fallback=byte_fallback))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap),
        normalizers.Replace(tokenizers.Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    specials = [p.piece for p in proto.pieces if p.type in (2, 3)]  # unknown, control
    tok.add_special_tokens(specials)
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    return tok


def write_unigram_gguf(proto, path):
    """As llama.cpp's converter writes XLM-RoBERTa vocabularies."""
    w = gguf.GGUFWriter(path, "bert")
    w.add_tokenizer_model("t5")
    w.add_token_list([p.piece for p in proto.pieces])
    w.add_token_scores([p.score for p in proto.pieces])
    w.add_token_types([int(p.type) for p in proto.pieces])  # SentencePiece's types are GGUF's
    w.add_precompiled_charsmap(proto.normalizer_spec.precompiled_charsmap)
    w.add_bos_token_id(proto.trainer_spec.bos_id)
    w.add_eos_token_id(proto.trainer_spec.eos_id)
    w.add_unk_token_id(proto.trainer_spec.unk_id)
    w.add_pad_token_id(proto.trainer_spec.pad_id)
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    w.add_bool("tokenizer.ggml.add_space_prefix", True)
    w.add_bool("tokenizer.ggml.remove_extra_whitespaces", True)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    rng = random.Random(31)
    corpus = make_corpus(rng)
    fixed = fixed_strings()
    bad = unicode_version_differences()
    strings = fixed + random_strings(rng, corpus, bad)
    expected = {}

    for name, lowercase in (("wordpiece-uncased", True), ("wordpiece-cased", False)):
        tok = train_wordpiece(corpus, lowercase)
        os.makedirs(os.path.join(outdir, name), exist_ok=True)
        tok.save(os.path.join(outdir, name, "tokenizer.json"))
        if lowercase:  # llama.cpp's GGUF has no flag: it always lower-cases
            write_wordpiece_gguf(tok, os.path.join(outdir, name + ".gguf"))
        expected[name] = {
            "ids": [e.ids for e in tok.encode_batch(strings, add_special_tokens=False)],
            "ids_special": [e.ids for e in tok.encode_batch(fixed, add_special_tokens=True)],
        }

    for name, byte_fallback in (("unigram", False), ("unigram-bytes", True)):
        sp, proto = train_unigram(corpus, outdir, name, byte_fallback)
        os.remove(os.path.join(outdir, name + ".vocab"))
        os.remove(os.path.join(outdir, name + ".model"))
        tok = unigram_tokenizer_json(proto)
        os.makedirs(os.path.join(outdir, name), exist_ok=True)
        tok.save(os.path.join(outdir, name, "tokenizer.json"))
        write_unigram_gguf(proto, os.path.join(outdir, name + ".gguf"))
        ids = [e.ids for e in tok.encode_batch(strings, add_special_tokens=False)]
        expected[name] = {
            "ids": ids,
            "ids_special": [e.ids for e in tok.encode_batch(fixed, add_special_tokens=True)],
        }
        if not byte_fallback:  # the XLM-R decoder (Metaspace) leaves <0xNN> pieces as text
            expected[name]["decoded"] = tok.decode_batch(ids, skip_special_tokens=True)
        expected[name + ".gguf"] = {
            "ids": sp.encode(strings),
            "ids_special": [[sp.bos_id()] + ids + [sp.eos_id()] for ids in sp.encode(fixed)],
        }

    with open(os.path.join(outdir, "strings.json"), "w", encoding="utf-8") as f:
        json.dump({"n_fixed": len(fixed), "strings": strings}, f, ensure_ascii=False)
    for name, e in expected.items():
        with open(os.path.join(outdir, name.replace(".gguf", "-gguf") + ".ids.json"), "w") as f:
            json.dump(e, f, separators=(",", ":"))
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump({"tokenizers": tokenizers.__version__, "sentencepiece": spm.__version__,
                   "gguf": getattr(gguf, "__version__", "?"), "python_unicode": unicodedata.unidata_version,
                   "excluded_code_points": len(bad), "random": N_RANDOM, "fixed": len(fixed)}, f, indent=1)


if __name__ == "__main__":
    main()
