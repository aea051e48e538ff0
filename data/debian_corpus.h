// The offline English corpus: GCIDE, the GNU Collaborative International Dictionary of English
// (Webster's Revised Unabridged Dictionary of 1913 plus WordNet glosses), as Debian's `dict-gcide`
// package installs it: /usr/share/dictd/gcide.dict.dz, 13.5 MB compressed, 39,952,321 bytes of
// text (package 0.48.5+nmu2, Debian 12). scripts/install-deps.sh installs it, so the quickstart
// and the tests train and evaluate a char-LM without downloading anything.
//
// Why this package: it is tens of MB of real English prose in one file — definitions, etymologies
// and some 78,000 attributed quotations from English literature — about 40% of enwik8's size,
// nearly pure ASCII (3 bytes outside it; 24% of the bytes are spaces, much of it indentation). Other candidates were weaker: linux-doc-6.1 is 226 MB
// installed across ~9000 gzipped reStructuredText files, mostly technical prose with code,
// tables and markup; dict-wn (WordNet, 31 MB) is terse glosses in a rigid layout;
// bible-kjv-text is 4.5 MB. dict-gcide depends on `dictd | dict-server`, so installing it also
// installs the dictd server, which listens on 127.0.0.1 only (and is not started in containers
// whose policy-rc.d forbids it).
//
// Format: a dictd database is gzip (the .dz "dictzip" variant adds a random-access table in the
// gzip FEXTRA field; zlib reads it as ordinary gzip) of plain text; the .index file only maps
// headwords to offsets, and the text file already holds every entry in order. The conversion
// from GCIDE's SGML source to text was done by the package, leaving a light, regular notation:
// "Largess \Lar"gess\, n. [F. largesse, fr. large. See {Large}, a.]", entity escapes such as
// "[aum]", source tags "[1913 Webster]", and indented quotations. We keep that text exactly as
// installed — no stripping — as enwik8 keeps its XML and wiki markup: the conversion is then
// trivially deterministic and the corpus is byte-for-byte the package's file. The entries run in
// alphabetical order, so the contiguous 90/5/5 split (data/char_corpus.h) puts roughly the end of
// the alphabet in dev and test (dev starts at "Ticpolonga", test inside "Vanity"; a shift of
// headwords, not of style). Sizes: train 35,957,089, dev 1,997,616, test 1,997,616 bytes.
#pragma once

#include <string>
#include <vector>

#include "lsformer/data/char_corpus.h"

namespace lsf::data {

inline constexpr const char* kGcideDictPath = "/usr/share/dictd/gcide.dict.dz";

// The text of a dictd database file: gzip / dictzip (".dz") is decompressed, any other file is
// read as it is (an uncompressed ".dict").
std::string read_dictd_text(const std::string& path);

// GCIDE read from `path` (a dictd .dict.dz or .dict) as a byte-vocabulary corpus named "gcide",
// split contiguously 90/5/5 (fractional_split_sizes).
CharCorpus read_gcide_corpus(const std::string& path);

// The first of `candidates` that exists; throws saying that Debian's dict-gcide package is needed
// and that scripts/install-deps.sh installs it when none does.
std::string find_gcide(const std::vector<std::string>& candidates = {kGcideDictPath,
                                                                     "/usr/share/dictd/gcide.dict"});

// The corpus the quickstart and the tests use when no dataset is given: the installed GCIDE.
CharCorpus default_offline_corpus();

}  // namespace lsf::data
