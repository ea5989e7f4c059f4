// loader_check: asks cpp_embedder's own code what it makes of weight files. Built by gen.sh
// against a checkout of the origin (its sources are compiled in, never copied here); run by
// hand, never by CI.
//
//   loader_check load FILE...            one JSON object per file: what WeightLoader::load
//                                        returned (every tensor's name, shape, FNV-1a 64 of
//                                        its float bytes, first values; the vocabulary's count
//                                        and FNV-1a 64; the tensors WeightValidator finds
//                                        missing for the runtime's 6 layers) or what it threw
//   loader_check embed WEIGHTS VOCAB TEXT...
//                                        one JSON object: the runtime's Embedder built from
//                                        WEIGHTS and VOCAB, and the embedding of each TEXT
//                                        (or what the construction or an embedding threw)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "model/embedder.hpp"
#include "model/weights.hpp"

namespace {

std::string json_str(const std::string &s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += static_cast<char>(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else {
            o += static_cast<char>(c);
        }
    }
    return o + "\"";
}

// FNV-1a 64 (offset basis 14695981039346656037, prime 1099511628211).
std::uint64_t fnv64(const void *p, std::size_t n, std::uint64_t h = 14695981039346656037ull) {
    const unsigned char *b = static_cast<const unsigned char *>(p);
    for (std::size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

std::string hex64(std::uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

std::string num(float f) {
    char b[40];
    std::snprintf(b, sizeof b, "%.9g", static_cast<double>(f));
    return b;
}

int load(int argc, char **argv) {
    using cpp_embedder::model::ModelWeights;
    using cpp_embedder::model::WeightLoader;
    using cpp_embedder::model::WeightValidator;
    for (int i = 0; i < argc; i++) {
        std::string out = "{\"file\": " + json_str(argv[i]);
        try {
            ModelWeights w = WeightLoader::load(argv[i]);
            std::vector<std::string> names = w.tensor_names();
            std::sort(names.begin(), names.end());
            out += ", \"loaded\": true, \"tensors\": [";
            for (std::size_t k = 0; k < names.size(); k++) {
                const auto &t = w.get(names[k]);
                out += (k ? ", " : "") + std::string("{\"name\": ") + json_str(names[k]) +
                       ", \"shape\": [";
                for (std::size_t d = 0; d < t.ndim(); d++)
                    out += (d ? ", " : "") + std::to_string(t.shape()[d]);
                out += "], \"fnv1a64\": \"" + hex64(fnv64(t.data(), t.size() * sizeof(float))) +
                       "\", \"first\": [";
                for (std::size_t j = 0; j < t.size() && j < 4; j++)
                    out += (j ? ", " : "") + num(t.data()[j]);
                out += "]}";
            }
            std::uint64_t vh = 14695981039346656037ull;
            for (const auto &tok : w.vocabulary()) {
                unsigned char len[4];
                std::uint32_t l = static_cast<std::uint32_t>(tok.size());
                for (int b = 0; b < 4; b++) len[b] = static_cast<unsigned char>(l >> (8 * b));
                vh = fnv64(len, 4, vh);
                vh = fnv64(tok.data(), tok.size(), vh);
            }
            out += "], \"vocab_count\": " + std::to_string(w.vocabulary().size()) +
                   ", \"vocab_fnv1a64\": \"" + hex64(vh) + "\", \"missing_for_runtime\": " +
                   std::to_string(WeightValidator::get_missing_tensors(w, 6).size());
        } catch (const std::exception &e) {
            out += ", \"loaded\": false, \"error\": " + json_str(e.what());
        }
        std::printf("%s}\n", out.c_str());
    }
    return 0;
}

int embed(int argc, char **argv) {
    const std::string head = "{\"weights\": " + json_str(argv[0]);
    std::string out = head;
    try {
        cpp_embedder::model::Embedder e(argv[0], argv[1]);
        out += ", \"built\": true, \"embeddings\": [";
        for (int i = 2; i < argc; i++) {
            std::vector<float> v = e.embed(argv[i]);
            out += (i > 2 ? ", " : "") + std::string("{\"text\": ") + json_str(argv[i]) +
                   ", \"vector\": [";
            for (std::size_t j = 0; j < v.size(); j++) out += (j ? ", " : "") + num(v[j]);
            out += "]}";
        }
        out += "]";
    } catch (const std::exception &ex) {
        out = head + ", \"built\": false, \"error\": " + json_str(ex.what());
    }
    std::printf("%s}\n", out.c_str());
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc >= 3 && std::string(argv[1]) == "load") return load(argc - 2, argv + 2);
    if (argc >= 5 && std::string(argv[1]) == "embed") return embed(argc - 2, argv + 2);
    std::fprintf(stderr, "usage: loader_check load FILE... | embed WEIGHTS VOCAB TEXT...\n");
    return 2;
}
