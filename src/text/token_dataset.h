// TokenDataset: the documents of token files as one native dataset.  Sample
// i is document i, a variable-length 1-D tensor of token ids ("input_ids"),
// the files' documents one file after another.  The formats:
//   - Megatron's indexed dataset: a .bin of tokens and its .idx (header
//     "MMIDIDX\0\0", version 1, the dtype's code, the sequence and document
//     counts, then each sequence's length and byte offset and the document
//     index).  A document is a Megatron sequence (what its IndexedDataset[i]
//     returns); every dtype Megatron writes (integer codes; a float .bin is
//     refused: its elements are not token ids);
//   - flat token files: a .bin of uint16 or uint32 tokens with no header
//     (nanoGPT's), documents ending after each end-of-document id;
//   - .npy: a 1-D array of integer tokens, documents split likewise.
// Opening reads the .idx files (12 bytes a document kept) or scans a flat
// file once for its end-of-document ids; tokens are read (pread) as
// documents are.  Errors name the file, the document and the byte or token
// offset: a .bin shorter than its .idx says (truncated), an .idx whose
// offsets disagree with its lengths or its .bin, a token outside the
// vocabulary (vocab_size; DataLoss, so on_error="skip" skips the document).
#ifndef STOKER_TEXT_TOKEN_DATASET_H_
#define STOKER_TEXT_TOKEN_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/file_reader.h"
#include "stoker/native_dataset.h"
#include "stoker/status.h"

namespace stoker {

struct TokenDatasetOptions {
  // Flat .bin files (no .idx beside them): "uint16" or "uint32".
  std::string flat_dtype;
  // Flat and .npy files: a document ends after each token equal to eos_id
  // (which stays in it); < 0: each file is one document.
  int64_t eos_id = -1;
  // > 0: a token outside [0, vocab_size) is a DataLoss error.
  int64_t vocab_size = 0;
  ElementType out = ElementType::kInt64;  // the samples' dtype (an integer type)
};

class TokenDataset : public NativeDataset {
 public:
  // paths: each a Megatron .bin, .idx or their common prefix, a flat .bin
  // or a .npy.
  static Result<std::shared_ptr<TokenDataset>> Open(const std::vector<std::string>& paths,
                                                    TokenDatasetOptions options);
  uint64_t size() const override { return first_doc_.back(); }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t index, uint8_t* const* dst) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;
  std::string DescribeSample(uint64_t index) const override;
  SampleStructure structure() const override { return SampleStructure::kDict; }
  uint64_t tokens() const { return tokens_; }
  // Document `index`'s length in tokens.
  uint32_t DocumentLength(uint64_t index) const;
  // Tokens [offset, offset + n) of document `index` as int64 (the
  // vocabulary checked, as Read checks it).
  Status ReadTokens(uint64_t index, uint64_t offset, uint64_t n, int64_t* out) const;

  // One file's documents (token_dataset.cc opens them).
  struct File {
    FileReader reader;
    std::string name;             // the .bin (or .npy) for messages
    ElementType dtype = ElementType::kUInt16;
    std::vector<uint64_t> offset;  // each document's byte offset in the file
    std::vector<uint32_t> length;  // ... and its tokens
  };

 private:
  TokenDataset() = default;
  // (file, document within it) of global index `index` (< size()).
  std::pair<size_t, uint64_t> Locate(uint64_t index) const;
  // Tokens [offset, offset + n) of document `index` as `out` (int64 or int32) at dst.
  Status ReadAs(uint64_t index, uint64_t offset, uint64_t n, ElementType out, uint8_t* dst) const;
  std::vector<File> files_;
  std::vector<uint64_t> first_doc_;  // files + 1
  std::vector<FieldSpec> fields_;
  TokenDatasetOptions options_;
  uint64_t tokens_ = 0;
};

}  // namespace stoker

#endif  // STOKER_TEXT_TOKEN_DATASET_H_
