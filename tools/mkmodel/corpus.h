// An embedded multilingual training text for the tiny test models' BPE
// vocabulary (tools/mkmodel/bpe_train.h). Original prose written for this
// project: English, German, French, Spanish, Russian, Greek, Chinese
// (simplified and traditional), Japanese, Korean, Arabic, Hebrew, Hindi, Thai,
// emoji (ZWJ sequences, flags, skin tones), numbers of many lengths, C++,
// Python, JSON and shell snippets, URLs, contractions in both cases, CRLF line
// ends and tabs.
#pragma once

#include <string_view>

namespace k3::tools {

// The whole corpus, valid UTF-8 (about 50 KB). Built once; the view stays valid
// for the life of the process.
std::string_view embedded_corpus();

}  // namespace k3::tools
