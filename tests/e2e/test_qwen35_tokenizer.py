"""Qwen3.5's pre-tokenizer (llama.cpp's "qwen35": Qwen2's split, but letter runs take combining marks) against
llama.cpp itself: llama.cpp's vocabulary-only ggml-vocab-qwen35.gguf (extracted by scripts/setup-venv.sh from the
pinned llama-cpp-python sdist), tokenized by minfer and by llama-cpp-python on a page of real multilingual text full of
combining marks: Devanagari, Tamil and Bengali vowel signs, Vietnamese and Yoruba tone marks (composed and decomposed),
French, German and polytonic Greek in NFD, Thai, vowelled Arabic and Hebrew. The same vocabulary under Qwen2's rule
(tokenizer.ggml.pre rewritten to "qwen2") tokenizes some of it differently, so the rule is what the test checks.
"""

from __future__ import annotations

import unicodedata

import pytest

from conftest import tokenization_mismatches

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is in the project venv (scripts/setup-venv.sh)")
gguf = pytest.importorskip("gguf", reason="gguf is in the project venv (scripts/setup-venv.sh)")


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


# Article 1 of the Universal Declaration of Human Rights in several scripts, and a little code.
VIETNAMESE = ("Tất cả mọi người sinh ra đều được tự do và bình đẳng về nhân phẩm và quyền lợi. Mọi con người đều được "
              "tạo hóa ban cho lý trí và lương tâm và cần phải đối xử với nhau trong tình anh em.")
YORUBA = "Gbogbo ènìyàn ni a bí ní òmìnira; iyì àti ẹ̀tọ́ kọ̀ọ̀kan sì dọ́gba."
PAGE = [
    "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात स्वतन्त्रता और समानता प्राप्त है। उन्हें बुद्धि और "
    "अन्तरात्मा की देन प्राप्त है और परस्पर उन्हें भाईचारे के भाव से बर्ताव करना चाहिए।",
    VIETNAMESE,
    nfd(VIETNAMESE),
    nfd("Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de raison et de "
        "conscience et doivent agir les uns envers les autres dans un esprit de fraternité."),
    nfd("Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft und Gewissen begabt "
        "und sollen einander im Geist der Brüderlichkeit begegnen."),
    nfd("Ὅλοι οἱ ἄνθρωποι γεννιοῦνται ἐλεύθεροι καὶ ἴσοι στὴν ἀξιοπρέπεια καὶ τὰ δικαιώματα."),
    "มนุษย์ทั้งหลายเกิดมามีอิสระและเสมอภาคกันในเกียรติศักดิ์และสิทธิ ต่างมีเหตุผลและมโนธรรม "
    "และควรปฏิบัติต่อกันด้วยเจตนารมณ์แห่งภราดรภาพ",
    "يُولَدُ جَمِيعُ النَّاسِ أَحْرَارًا مُتَسَاوِينَ فِي الْكَرَامَةِ وَالْحُقُوقِ. "
    "وَقَدْ وُهِبُوا عَقْلًا وَضَمِيرًا.",
    "כָּל בְּנֵי הָאָדָם נוֹלְדוּ בְּנֵי חוֹרִין וְשָׁוִים בְּעֶרְכָּם וּבִזְכֻיּוֹתֵיהֶם.",
    "மனிதப் பிறவியினர் சகலரும் சுதந்திரமாகவே பிறக்கின்றனர்; அவர்கள் மதிப்பிலும், உரிமைகளிலும் சமமானவர்கள்.",
    "সমস্ত মানুষ স্বাধীনভাবে সমান মর্যাদা এবং অধিকার নিয়ে জন্মগ্রহণ করে।",
    YORUBA,
    nfd(YORUBA),
    nfd("모든 인간은 태어날 때부터 자유로우며 그 존엄과 권리에 있어 동등하다."),
    "naïve_café = 'cafe\u0301' + \"Ω\"  # ✓ 👍🏽 1,234.56\n\t \u0301leading mark, x\u0301\u0302\u0303 stacked",
]


def with_pre(src, dst, pre: str):
    """A copy of the GGUF at src whose tokenizer.ggml.pre is `pre` (the same vocabulary, another split rule)."""
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch=reader.fields["general.architecture"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = pre if key == "tokenizer.ggml.pre" else field.contents()
        sub_type = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, value, field.types[0], sub_type=sub_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def llamacpp_ids(path, texts):
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return [vocab.tokenize(t.encode(), add_bos=False, special=False) for t in texts]


def test_qwen35_matches_llamacpp_on_marked_text(minfer, llama_vocab, tmp_path):
    path = llama_vocab("qwen35")
    texts = PAGE + ["\n".join(PAGE)]
    mismatches = tokenization_mismatches(minfer, path, texts)
    print(f"qwen35: {len(texts)} texts, {len(mismatches)} mismatches")
    assert not mismatches, "\n".join(mismatches)

    # Qwen2's rule over the same vocabulary: minfer still agrees with llama.cpp, and some texts change.
    qwen2 = with_pre(path, tmp_path / "qwen2.gguf", "qwen2")
    mismatches = tokenization_mismatches(minfer, qwen2, texts)
    assert not mismatches, "\n".join(mismatches)
    differ = [(t, a, b) for t, a, b in zip(PAGE, llamacpp_ids(path, PAGE), llamacpp_ids(qwen2, PAGE)) if a != b]
    for text, a, b in differ:
        print(f"qwen35 {len(a)} ids, qwen2 {len(b)}: {text[:40]!r}")
    assert differ, "no text of the page tells qwen35 from qwen2"
