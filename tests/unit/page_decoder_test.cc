// parquet/page_decoder: each page of each column, decoded alone, holds the
// rows its row group's decode has at its place (numbers with nulls,
// fixed-size lists, lists, dictionary-encoded strings; zstd and none).
#include "parquet/page_decoder.h"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace stoker {
namespace {

std::shared_ptr<arrow::Table> Table(int64_t n) {
  arrow::Int64Builder id;
  arrow::FloatBuilder emb_values;
  arrow::FixedSizeListBuilder emb(arrow::default_memory_pool(),
                                  std::shared_ptr<arrow::ArrayBuilder>(&emb_values, [](auto*) {}), 4);
  arrow::StringDictionaryBuilder cat;
  arrow::Int32Builder tok_values;
  arrow::ListBuilder toks(arrow::default_memory_pool(), std::shared_ptr<arrow::ArrayBuilder>(&tok_values, [](auto*) {}));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_TRUE((i % 11 == 5 ? id.AppendNull() : id.Append(i * 3)).ok());
    EXPECT_TRUE(emb.Append().ok());
    for (int k = 0; k < 4; ++k) EXPECT_TRUE(emb_values.Append(static_cast<float>(i) + 0.25f * k).ok());
    EXPECT_TRUE(cat.Append(i % 3 == 0 ? "web" : i % 3 == 1 ? "code" : "books").ok());
    EXPECT_TRUE(toks.Append().ok());
    for (int k = 0; k < i % 5; ++k) EXPECT_TRUE(tok_values.Append(static_cast<int32_t>(i + k)).ok());
  }
  std::shared_ptr<arrow::Array> a, b, c, d;
  EXPECT_TRUE(id.Finish(&a).ok());
  EXPECT_TRUE(emb.Finish(&b).ok());
  EXPECT_TRUE(cat.Finish(&c).ok());
  EXPECT_TRUE(toks.Finish(&d).ok());
  return arrow::Table::Make(arrow::schema({arrow::field("id", arrow::int64()), arrow::field("emb", b->type()),
                                           arrow::field("cat", c->type()), arrow::field("toks", d->type())}),
                            {a, b, c, d});
}

void CheckEveryPage(parquet::Compression::type codec) {
  const std::string path = testing::TempDir() + "/pages_" + std::to_string(getpid()) + ".parquet";
  auto t = Table(3000);
  auto props = parquet::WriterProperties::Builder()
                   .enable_write_page_index()
                   ->data_pagesize(512)
                   ->write_batch_size(64)
                   ->compression(codec)
                   ->build();
  auto arrow_props = parquet::ArrowWriterProperties::Builder().store_schema()->build();
  auto out = arrow::io::FileOutputStream::Open(path).ValueOrDie();
  ASSERT_TRUE(parquet::arrow::WriteTable(*t, arrow::default_memory_pool(), out, 1000, props, arrow_props).ok());
  ASSERT_TRUE(out->Close().ok());

  auto file = arrow::io::ReadableFile::Open(path).ValueOrDie();
  auto pq = parquet::ParquetFileReader::Open(file);
  auto meta = pq->metadata();
  auto reader = parquet::arrow::FileReader::Make(arrow::default_memory_pool(),
                                                 parquet::ParquetFileReader::Open(file)).ValueOrDie();
  std::shared_ptr<arrow::Schema> schema;
  ASSERT_TRUE(reader->GetSchema(&schema).ok());
  for (int field = 0; field < 4; ++field) {
    auto d = PageDecoder::Make(meta, schema, field, field).value();  // (one leaf a field, in order)
    auto pages = d->Pages(*pq, path);
    ASSERT_TRUE(pages.ok()) << pages.status().message();
    ASSERT_EQ(pages->size(), 3u);
    for (int g = 0; g < 3; ++g) {
      const ColumnPages& p = (*pages)[g];
      // (small pages, several a row group; the dictionary's indices, 2 bits a row, fit one)
      ASSERT_GT(p.offset.size(), field == 2 ? 0u : 2u) << "field " << field;
      auto whole = reader->ReadRowGroup(g, {field}).ValueOrDie()->CombineChunks().ValueOrDie()->column(0)->chunk(0);
      for (size_t k = 0; k < p.offset.size(); ++k) {
        auto got = d->Decode(*file, g, p, k);
        ASSERT_TRUE(got.ok()) << "field " << field << " row group " << g << " page " << k << ": "
                              << got.status().message();
        auto want = whole->Slice(p.first_row[k], p.RowsOf(k));
        ASSERT_TRUE((*got)->type()->Equals(*want->type())) << (*got)->type()->ToString() << " " << want->type()->ToString();
        // (a dictionary page's values may be laid out as the chunk's; compare decoded)
        ASSERT_TRUE((*got)->Equals(*want) || (*got)->RangeEquals(*want, 0, want->length(), 0) ||
                    field == 2)
            << "field " << field << " row group " << g << " page " << k;
        if (field == 2) {
          auto& gd = static_cast<const arrow::DictionaryArray&>(**got);
          auto& wd = static_cast<const arrow::DictionaryArray&>(*want);
          for (int64_t r = 0; r < want->length(); ++r)
            ASSERT_EQ(gd.dictionary()->GetScalar(gd.GetValueIndex(r)).ValueOrDie()->ToString(),
                      wd.dictionary()->GetScalar(wd.GetValueIndex(r)).ValueOrDie()->ToString());
        }
        EXPECT_EQ(p.PageOf(p.first_row[k]), k);
      }
    }
  }
  unlink(path.c_str());
}

TEST(PageDecoder, EachPageDecodedAloneHoldsItsRowsOfTheRowGroup) {
  CheckEveryPage(parquet::Compression::ZSTD);
  CheckEveryPage(parquet::Compression::UNCOMPRESSED);
}

TEST(PageDecoder, AFileWithoutAPageIndexIsRefusedSayingHowToWriteOne) {
  const std::string path = testing::TempDir() + "/nopages_" + std::to_string(getpid()) + ".parquet";
  auto out = arrow::io::FileOutputStream::Open(path).ValueOrDie();
  ASSERT_TRUE(parquet::arrow::WriteTable(*Table(100), arrow::default_memory_pool(), out, 50,
                                         parquet::WriterProperties::Builder().disable_write_page_index()->build()).ok());
  ASSERT_TRUE(out->Close().ok());
  auto file = arrow::io::ReadableFile::Open(path).ValueOrDie();
  auto pq = parquet::ParquetFileReader::Open(file);
  auto reader = parquet::arrow::FileReader::Make(arrow::default_memory_pool(),
                                                 parquet::ParquetFileReader::Open(file)).ValueOrDie();
  std::shared_ptr<arrow::Schema> schema;
  ASSERT_TRUE(reader->GetSchema(&schema).ok());
  auto d = PageDecoder::Make(pq->metadata(), schema, 0, 0).value();
  auto pages = d->Pages(*pq, path);
  ASSERT_FALSE(pages.ok());
  EXPECT_NE(pages.status().message().find("has no page index"), std::string::npos);
  EXPECT_NE(pages.status().message().find("write_page_index=True"), std::string::npos);
  unlink(path.c_str());
}

}  // namespace
}  // namespace stoker
