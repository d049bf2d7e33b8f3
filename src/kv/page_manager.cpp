#include "kv/page_manager.h"

#include <algorithm>

#include "base/error.h"
#include "kv/page_hash.h"

namespace minfer {

PageManager::PageManager(const PageManagerOptions& options)
    : opt_(options), pages_(static_cast<size_t>(std::max<int64_t>(options.num_pages, 1))) {
  MINFER_CHECK(opt_.num_pages >= 2, "the KV pool needs at least one usable page, has {}", opt_.num_pages);
  MINFER_CHECK(opt_.page.size() > 0, "page_size {}", opt_.page.size());
  // Lowest ids first, so a fresh pool hands out pages 1, 2, 3, ...
  for (int32_t p = 1; p < static_cast<int32_t>(opt_.num_pages); ++p) push_free_back(p);
}

void PageManager::push_free_back(int32_t page) {
  Page& pg = pages_[static_cast<size_t>(page)];
  pg.prev = free_tail_;
  pg.next = -1;
  if (free_tail_ >= 0) pages_[static_cast<size_t>(free_tail_)].next = page;
  free_tail_ = page;
  if (free_head_ < 0) free_head_ = page;
  pg.in_free = true;
  ++free_count_;
}

void PageManager::push_free_front(int32_t page) {
  Page& pg = pages_[static_cast<size_t>(page)];
  pg.prev = -1;
  pg.next = free_head_;
  if (free_head_ >= 0) pages_[static_cast<size_t>(free_head_)].prev = page;
  free_head_ = page;
  if (free_tail_ < 0) free_tail_ = page;
  pg.in_free = true;
  ++free_count_;
}

void PageManager::unlink_free(int32_t page) {
  Page& pg = pages_[static_cast<size_t>(page)];
  MINFER_CHECK(pg.in_free, "page {} is not in the free queue", page);
  if (pg.prev >= 0)
    pages_[static_cast<size_t>(pg.prev)].next = pg.next;
  else
    free_head_ = pg.next;
  if (pg.next >= 0)
    pages_[static_cast<size_t>(pg.next)].prev = pg.prev;
  else
    free_tail_ = pg.prev;
  pg.prev = pg.next = -1;
  pg.in_free = false;
  --free_count_;
}

void PageManager::uncache(int32_t page) {
  Page& pg = pages_[static_cast<size_t>(page)];
  if (!pg.cached) return;
  auto it = cache_.find(pg.key);
  if (it != cache_.end() && it->second == page) cache_.erase(it);
  pg.cached = false;
  pg.uid = 0;
  pg.parent_uid = 0;
  pg.tokens.clear();
}

int32_t PageManager::pop_free() {
  MINFER_CHECK(free_head_ >= 0, "no free page");
  const int32_t page = free_head_;
  unlink_free(page);
  if (Page& pg = pages_[static_cast<size_t>(page)]; pg.cached) {
    if (events_) events_->on_evicted(group_, page, pg.content, pg.tokens);
    uncache(page);
    ++stats_.evictions;
  }
  pages_[static_cast<size_t>(page)].uid = 0;
  return page;
}

void PageManager::release(int32_t page) {
  Page& pg = pages_[static_cast<size_t>(page)];
  MINFER_CHECK(pg.refs > 0, "releasing page {} with no reference", page);
  if (--pg.refs > 0) return;
  // Unreferenced cached pages stay findable until evicted (LRU from the front); others are reused first.
  if (pg.cached)
    push_free_back(page);
  else
    push_free_front(page);
}

std::vector<int32_t> PageManager::lookup_prefix(std::span<const int32_t> tokens) const {
  std::vector<int32_t> hit;
  if (!opt_.enable_prefix_caching || tokens.empty()) return hit;
  const int64_t ps = opt_.page.size();
  const int64_t full_pages = (static_cast<int64_t>(tokens.size()) - 1) / ps;  // leave the last token out
  uint64_t h = kRootPageHash;
  uint64_t parent_uid = 0;
  for (int64_t j = 0; j < full_pages; ++j) {
    const auto page_tokens = tokens.subspan(static_cast<size_t>(j * ps), static_cast<size_t>(ps));
    h = chain_page_hash(h, page_tokens);
    auto it = cache_.find(h & opt_.hash_mask);
    if (it == cache_.end()) break;
    const Page& pg = pages_[static_cast<size_t>(it->second)];
    // The key is only an index: the page must hold these tokens after exactly the prefix matched so far.
    if (pg.parent_uid != parent_uid ||
        !std::equal(page_tokens.begin(), page_tokens.end(), pg.tokens.begin(), pg.tokens.end()))
      break;
    hit.push_back(it->second);
    parent_uid = pg.uid;
  }
  return hit;
}

void PageManager::record_prefix_query(int64_t queried_tokens, int64_t hit_tokens) {
  stats_.queried_tokens += queried_tokens;
  stats_.hit_tokens += hit_tokens;
}

int64_t PageManager::pages_needed(RequestId seq, int64_t num_tokens) const {
  const int64_t want = std::max(opt_.page.pages_for(num_tokens), opt_.reserve_pages_per_seq);
  auto it = seqs_.find(seq);
  const int64_t have = it == seqs_.end() ? 0 : static_cast<int64_t>(it->second.table.size());
  return std::max<int64_t>(0, want - have);
}

bool PageManager::allocate(RequestId seq, int64_t num_tokens, std::span<const int32_t> prefix, int64_t keep_free) {
  auto it = seqs_.find(seq);
  const bool is_new = it == seqs_.end();
  MINFER_CHECK(prefix.empty() || is_new, "a prefix can only start a sequence's table (seq {})", seq);
  const int64_t have = is_new ? 0 : static_cast<int64_t>(it->second.table.size());
  const int64_t want =
      std::max({opt_.page.pages_for(num_tokens), opt_.reserve_pages_per_seq, static_cast<int64_t>(prefix.size())});
  const int64_t fresh = std::max<int64_t>(0, want - have - static_cast<int64_t>(prefix.size()));
  // Prefix pages nobody references sit in the free queue: taking them uses free pages too.
  int64_t revived = 0;
  for (int32_t p : prefix) revived += pages_[static_cast<size_t>(p)].refs == 0 ? 1 : 0;
  if (free_count_ - revived - fresh < keep_free) return false;
  if (fresh == 0 && prefix.empty() && !is_new) return true;

  SeqPages& sp = is_new ? seqs_[seq] : it->second;
  for (int32_t p : prefix) {
    Page& pg = pages_[static_cast<size_t>(p)];
    MINFER_CHECK(pg.cached, "prefix page {} is not cached", p);
    if (pg.refs == 0) unlink_free(p);
    ++pg.refs;
    sp.table.push_back(p);
  }
  for (int64_t i = 0; i < fresh; ++i) {
    const int32_t p = pop_free();
    pages_[static_cast<size_t>(p)].refs = 1;
    sp.table.push_back(p);
  }
  return true;
}

void PageManager::cache_full_pages(RequestId seq, std::span<const int32_t> tokens, int64_t num_computed) {
  if (!opt_.enable_prefix_caching) return;
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  SeqPages& sp = it->second;
  const int64_t ps = opt_.page.size();
  const int64_t full = std::min<int64_t>(num_computed / ps, static_cast<int64_t>(sp.table.size()));
  MINFER_CHECK(num_computed <= static_cast<int64_t>(tokens.size()), "{} computed of {} tokens", num_computed,
               tokens.size());
  for (int64_t j = sp.num_hashed; j < full && !sp.chain_broken; ++j) {
    const auto page_tokens = tokens.subspan(static_cast<size_t>(j * ps), static_cast<size_t>(ps));
    const uint64_t h = chain_page_hash(j == 0 ? kRootPageHash : sp.last_key, page_tokens);
    const uint64_t key = h & opt_.hash_mask;
    // The tiers' key, only where there are tiers to tell (set_events comes before any registration).
    const ContentKey content =
        events_ ? chain_content_key(j == 0 ? root_content_key(group_) : sp.last_content, page_tokens) : ContentKey{};
    const int32_t mine = sp.table[static_cast<size_t>(j)];
    if (mine == 0) break;  // released by release_before before it was hashed: nothing to register
    Page& pg = pages_[static_cast<size_t>(mine)];
    const uint64_t parent_uid = j == 0 ? 0 : sp.last_uid;
    if (pg.cached) {
      // A prefix-hit page (or one registered before this sequence was preempted): already in the chain.
      sp.last_uid = pg.uid;
    } else if (auto hit = cache_.find(key); hit == cache_.end()) {
      pg.cached = true;
      pg.key = key;
      pg.uid = next_uid_++;
      pg.parent_uid = parent_uid;
      pg.content = content;
      pg.tokens.assign(page_tokens.begin(), page_tokens.end());
      cache_.emplace(key, mine);
      sp.last_uid = pg.uid;
      if (events_) events_->on_registered(group_, mine, content, pg.tokens);
    } else {
      Page& other = pages_[static_cast<size_t>(hit->second)];
      if (other.parent_uid == parent_uid &&
          std::equal(page_tokens.begin(), page_tokens.end(), other.tokens.begin(), other.tokens.end())) {
        // Computed twice (two sequences prefilled the same prefix at once): keep one copy.
        if (other.refs == 0) unlink_free(hit->second);
        ++other.refs;
        sp.table[static_cast<size_t>(j)] = hit->second;
        release(mine);
        sp.last_uid = other.uid;
      } else {
        // A key collision with a different prefix: this sequence's later pages cannot be verified, so
        // they stay private.
        sp.chain_broken = true;
      }
    }
    sp.last_key = h;
    sp.last_content = content;
    sp.num_hashed = j + 1;
  }
}

void PageManager::free(RequestId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& table = it->second.table;
  for (auto p = table.rbegin(); p != table.rend(); ++p)
    if (*p != 0) release(*p);
  seqs_.erase(it);
}

int64_t PageManager::release_before(RequestId seq, int64_t first_kept) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return 0;
  SeqPages& sp = it->second;
  const int64_t end = std::min<int64_t>(first_kept, static_cast<int64_t>(sp.table.size()));
  int64_t released = 0;
  for (int64_t j = sp.num_released; j < end; ++j) {
    int32_t& page = sp.table[static_cast<size_t>(j)];
    if (page == 0) continue;
    release(page);
    page = 0;
    ++released;
  }
  sp.num_released = std::max(sp.num_released, end);
  return released;
}

int64_t PageManager::truncate(RequestId seq, int64_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return 0;
  SeqPages& sp = it->second;
  const int64_t keep = std::max({opt_.page.pages_for(num_tokens), opt_.reserve_pages_per_seq, sp.num_hashed});
  int64_t released = 0;
  while (static_cast<int64_t>(sp.table.size()) > keep) {
    if (sp.table.back() != 0) release(sp.table.back());
    sp.table.pop_back();
    ++released;
  }
  return released;
}

std::span<const int32_t> PageManager::page_table(RequestId seq) const {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return {};
  return it->second.table;
}

void PageManager::reset_prefix_cache() {
  for (int32_t p = 1; p < static_cast<int32_t>(opt_.num_pages); ++p) {
    Page& pg = pages_[static_cast<size_t>(p)];
    if (!pg.cached || pg.refs > 0) continue;
    uncache(p);
    // Move to the front: it is an ordinary free page now.
    unlink_free(p);
    push_free_front(p);
  }
}

void PageManager::check_invariants() const {
  std::vector<int32_t> refs(pages_.size(), 0);
  for (const auto& [id, sp] : seqs_)
    for (size_t j = 0; j < sp.table.size(); ++j) {
      const int32_t p = sp.table[j];
      if (p == 0 && static_cast<int64_t>(j) < sp.num_released) continue;  // released by release_before
      MINFER_CHECK(p >= 1 && p < static_cast<int32_t>(pages_.size()), "seq {} holds page {}", id, p);
      ++refs[static_cast<size_t>(p)];
    }
  int64_t free_seen = 0;
  int32_t prev = -1;
  for (int32_t p = free_head_; p >= 0; p = pages_[static_cast<size_t>(p)].next) {
    MINFER_CHECK(pages_[static_cast<size_t>(p)].prev == prev, "free queue link broken at page {}", p);
    MINFER_CHECK(pages_[static_cast<size_t>(p)].in_free, "page {} in the queue but not marked free", p);
    prev = p;
    ++free_seen;
    MINFER_CHECK(free_seen <= opt_.num_pages, "free queue has a cycle");
  }
  MINFER_CHECK(prev == free_tail_, "free queue tail {} != {}", free_tail_, prev);
  MINFER_CHECK(free_seen == free_count_, "free queue holds {} pages, count says {}", free_seen, free_count_);
  for (size_t p = 1; p < pages_.size(); ++p) {
    const Page& pg = pages_[p];
    MINFER_CHECK(pg.refs == refs[p], "page {} has ref count {} but {} table references", p, pg.refs, refs[p]);
    MINFER_CHECK(pg.in_free == (pg.refs == 0), "page {}: refs {} but in_free {}", p, pg.refs, pg.in_free);
    if (pg.cached) {
      auto it = cache_.find(pg.key);
      MINFER_CHECK(it != cache_.end() && it->second == static_cast<int32_t>(p), "cached page {} not indexed", p);
      MINFER_CHECK(static_cast<int64_t>(pg.tokens.size()) == opt_.page.size(), "cached page {} token count", p);
    }
  }
  for (const auto& [key, p] : cache_)
    MINFER_CHECK(pages_[static_cast<size_t>(p)].cached && pages_[static_cast<size_t>(p)].key == key,
                 "cache entry for page {} is stale", p);
  MINFER_CHECK(!pages_[0].in_free && pages_[0].refs == 0, "the null page was handed out");
}

}  // namespace minfer
