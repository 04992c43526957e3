"""Text normalization, tokenization and shingle hashing.

The rule, fixed and documented (docs/artifact-format.md, "Hash scheme"):

1. Normalize: Unicode NFKC, then ``str.casefold``; every Unicode whitespace character becomes a
   space. Pure-ASCII documents skip NFKC (it is the identity on ASCII) and are lowercased in the
   kernel. Lone surrogates are encoded with ``surrogatepass`` instead of raising.
2. Words are maximal runs of characters that are neither whitespace (or ASCII control) nor ASCII
   punctuation (``string.punctuation``). Non-ASCII characters belong to words.
3. Word k-shingles: every window of k consecutive words. A document with 1..k-1 words has exactly
   one shingle made of all its words; a document with no words has no shingles (it is "empty").
   Character k-grams: every window of k code points of the text with whitespace runs folded to one
   space and trimmed; the same short-document rule applies.
4. Hashes are 64-bit (FNV-1a over UTF-8 bytes, finalized with the splitmix64 mixer) and do not
   depend on the platform, the process or the thread count.

Everything is computed in Numba over one UTF-8 buffer of many documents plus offsets. The
package's modules, each importing only those listed before it:

- :mod:`.tables`: the byte and code-point tables of the rule, built from Python's Unicode data;
- :mod:`.buffers`: read-only buffers, subsets, segments scanned in threads;
- :mod:`.normalization`: NFKC around the characters it can change, and :func:`normalize`;
- :mod:`.fold`: the case fold and the space rule on UTF-8 bytes, alone or fused with NFKC;
- :mod:`.strview`: the CPython-string fast path (a batch read from the strings' own memory);
- :mod:`.encode`: a batch of documents into one buffer and offsets (:func:`encode_batch`);
- :mod:`.shingle`: :class:`Shingles`, the word/character/auto rule, :func:`shingle_hashes`;
- :mod:`.sets`: each document's distinct shingles for the exact Jaccard checks.

MinHash signatures of texts live in :mod:`diversify.sketches.minhash` and their SimHash
fingerprints in :mod:`diversify.sketches.simhash`; both read the batches made here.
"""

from __future__ import annotations

from .encode import encode_batch, encode_batch_scripts
from .normalization import nfkc, normalize
from .sets import exact_jaccard, shingle_sets32, sorted_unique_of_buffer, sorted_unique_shingles, unique_shingles
from .shingle import Shingles, shingle_buffer, shingle_hashes, unspaced_docs
from .tables import code_points

__all__ = ["normalize", "nfkc", "encode_batch", "encode_batch_scripts", "Shingles", "shingle_hashes", "shingle_buffer",
           "unspaced_docs", "sorted_unique_shingles", "sorted_unique_of_buffer", "unique_shingles", "shingle_sets32",
           "exact_jaccard", "code_points"]
