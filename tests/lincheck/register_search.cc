// SPDX-License-Identifier: Apache-2.0
#include "tests/lincheck/register_search.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace rkv::lincheck {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
// Register states: a value id (>= 0, index into the key's PUT values), or one of these.
constexpr int32_t kAbsent = -1;
constexpr int32_t kAnon = -2;  // present with the value of an unknown-outcome PUT nobody read

enum class Kind : uint8_t {
  kPut,      // PUT that took effect (acknowledged, or unknown but read by some GET)
  kDelOk,    // DELETE -> OK: present before, absent after
  kDelNf,    // DELETE -> NOT_FOUND: absent, unchanged
  kGet,      // GET -> value `val`
  kGetNf,    // GET -> NOT_FOUND
  kFreePut,  // unknown-outcome PUT nobody read: any time after its call, or never
  kFreeDel,  // unknown-outcome DELETE: any time after its call, or never
};

struct SOp {
  int64_t call = 0, ret = 0;
  Kind kind = Kind::kGet;
  int32_t val = kAbsent;  // kPut: the value it writes; kGet: the value it read
  const Op* src = nullptr;
};

enum class ChoiceType : uint8_t { kRegular, kFreePut, kFreeDel };
struct Choice {
  ChoiceType type;
  int32_t index;  // kRegular: op index
  int score;
  int64_t ret;
};

struct Frame {
  std::vector<Choice> choices;
  size_t next = 0;
  size_t undo_begin = 0;
  ChoiceType how = ChoiceType::kRegular;
  int32_t prev_state = kAbsent;
};

}  // namespace

struct RegisterSearch::Impl {
  std::string key;
  std::vector<const Op*> input;
  int64_t origin;
  uint64_t max_states;

  std::vector<SOp> ops;  // regular ops, sorted by call time
  std::vector<int64_t> calls;
  std::vector<SOp> free_puts, free_dels;  // sorted by call time
  std::vector<const Op*> value_put;       // value id -> its PUT
  std::vector<int32_t> readers_left;      // value id -> unlinearized GETs of it
  int32_t n = 0;

  // Search state.
  std::vector<int32_t> next, prev;  // dancing links over unlinearized ops; sentinel n
  size_t leaves = 1;
  std::vector<std::pair<int64_t, int32_t>> tree;  // min (return, op) over unlinearized ops
  std::vector<uint64_t> bits;                     // linearized regular ops
  int32_t state = kAbsent;
  uint32_t npp = 0, npd = 0;  // free PUTs / DELETEs linearized (a prefix of each list)
  int32_t nlin = 0;
  std::vector<int32_t> undo;
  std::unordered_set<std::string> dead;  // memo of states from which no completion exists
  uint64_t steps = 0;

  // The deepest dead end seen (most ops linearized), for the explanation.
  int32_t best_nlin = -1;
  int32_t best_blocked = -1;
  std::vector<std::string> best_states;
  std::vector<int32_t> best_concurrent;

  std::string DescribeState(int32_t s) const {
    if (s == kAbsent) return "absent";
    if (s == kAnon) return "the value of an unknown-outcome PUT that no GET read";
    return "value " + value_put[s]->value + " (" + Describe(*value_put[s], origin) + ")";
  }

  void TreeSet(int32_t i, int64_t ret) {
    size_t p = leaves + size_t(i);
    tree[p] = {ret, i};
    for (p /= 2; p >= 1; p /= 2) tree[p] = std::min(tree[2 * p], tree[2 * p + 1]);
  }

  void Linearize(int32_t i) {
    next[prev[i]] = next[i];
    prev[next[i]] = prev[i];
    TreeSet(i, kInf);
    bits[size_t(i) >> 6] |= uint64_t{1} << (i & 63);
    if (ops[i].kind == Kind::kGet) --readers_left[ops[i].val];
    undo.push_back(i);
    ++nlin;
  }

  void Unlinearize(int32_t i) {
    next[prev[i]] = i;
    prev[next[i]] = i;
    TreeSet(i, ops[i].ret);
    bits[size_t(i) >> 6] &= ~(uint64_t{1} << (i & 63));
    if (ops[i].kind == Kind::kGet) ++readers_left[ops[i].val];
    --nlin;
  }

  bool ReadMatches(const SOp& o) const {
    switch (o.kind) {
      case Kind::kGet:
        return state == o.val;
      case Kind::kGetNf:
      case Kind::kDelNf:
        return state == kAbsent;
      default:
        return false;
    }
  }

  // Linearizes every candidate read whose result matches the state (no branching needed).
  void Closure() {
    int64_t m = tree[1].first;
    for (int32_t i = next[n]; i != n && ops[i].call <= m;) {
      int32_t nx = next[i];
      if (ReadMatches(ops[i])) {
        Linearize(i);
        m = tree[1].first;
      }
      i = nx;
    }
  }

  // Overwriting the current state loses its value for good (values are unique): not allowed
  // while a GET of it is still to be linearized.
  bool MayOverwrite() const { return state < 0 || readers_left[state] == 0; }

  std::vector<Choice> Choices() const {
    std::vector<Choice> out;
    auto [m, blocked] = tree[1];
    const SOp& b = ops[blocked];
    bool overwrite = MayOverwrite();
    for (int32_t i = next[n]; i != n && ops[i].call <= m; i = next[i]) {
      const SOp& o = ops[i];
      int score = 1;
      if (o.kind == Kind::kPut) {
        if (!overwrite) continue;
        if ((b.kind == Kind::kGet && b.val == o.val) || (b.kind == Kind::kDelOk) || i == blocked)
          score = 0;
      } else if (o.kind == Kind::kDelOk) {
        if (state == kAbsent || !overwrite) continue;
        if (b.kind == Kind::kGetNf || b.kind == Kind::kDelNf || i == blocked) score = 0;
      } else {
        continue;  // reads that do not match the state must wait for a write
      }
      out.push_back({ChoiceType::kRegular, i, score, o.ret});
    }
    if (overwrite && state != kAnon && npp < free_puts.size() && free_puts[npp].call <= m)
      out.push_back({ChoiceType::kFreePut, int32_t(npp), b.kind == Kind::kDelOk ? 0 : 2, kInf});
    if (overwrite && state != kAbsent && npd < free_dels.size() && free_dels[npd].call <= m) {
      int score = (b.kind == Kind::kGetNf || b.kind == Kind::kDelNf) ? 0 : 2;
      out.push_back({ChoiceType::kFreeDel, int32_t(npd), score, kInf});
    }
    std::stable_sort(out.begin(), out.end(), [](const Choice& x, const Choice& y) {
      return x.score != y.score ? x.score < y.score : x.ret < y.ret;
    });
    return out;
  }

  void Apply(const Choice& c, Frame* f) {
    f->undo_begin = undo.size();
    f->how = c.type;
    f->prev_state = state;
    switch (c.type) {
      case ChoiceType::kRegular:
        Linearize(c.index);
        state = ops[c.index].kind == Kind::kPut ? ops[c.index].val : kAbsent;
        break;
      case ChoiceType::kFreePut:
        ++npp;
        state = kAnon;
        break;
      case ChoiceType::kFreeDel:
        ++npd;
        state = kAbsent;
        break;
    }
  }

  void Undo(const Frame& f) {
    while (undo.size() > f.undo_begin) {
      Unlinearize(undo.back());
      undo.pop_back();
    }
    if (f.how == ChoiceType::kFreePut) --npp;
    if (f.how == ChoiceType::kFreeDel) --npd;
    state = f.prev_state;
  }

  // Canonical search state: every op before the first unlinearized one (k) is linearized and
  // none called after m is, so (k, the bit words from k up to m's end, state, npp, npd) is it.
  std::string Key() const {
    int32_t k = next[n];
    int64_t m = tree[1].first;
    size_t end = size_t(std::upper_bound(calls.begin(), calls.end(), m) - calls.begin());
    size_t w0 = size_t(k) >> 6, w1 = (end + 63) >> 6;
    while (w1 > w0 + 1 && bits[w1 - 1] == 0) --w1;
    std::string key(16 + 8 * (w1 - w0), '\0');
    int32_t head[4] = {k, state, int32_t(npp), int32_t(npd)};
    std::memcpy(&key[0], head, sizeof head);
    std::memcpy(&key[16], &bits[w0], 8 * (w1 - w0));
    return key;
  }

  void RecordDeadEnd() {
    int32_t blocked = tree[1].second;
    if (nlin > best_nlin) {
      best_nlin = nlin;
      best_blocked = blocked;
      best_states.clear();
      best_concurrent.clear();
      int64_t m = tree[1].first;
      for (int32_t i = next[n]; i != n && ops[i].call <= m && best_concurrent.size() < 8;
           i = next[i])
        if (i != blocked) best_concurrent.push_back(i);
    }
    if (nlin != best_nlin || best_states.size() >= 4) return;
    std::string s = DescribeState(state);
    if (!MayOverwrite()) {
      // Name the latest GET that keeps this value from being overwritten: when a value shows
      // up again long after it was overwritten, that is the stale read.
      int32_t last = -1;
      for (int32_t i = next[n]; i != n; i = next[i])
        if (ops[i].kind == Kind::kGet && ops[i].val == state) last = i;
      s += "; overwriting it would leave " + std::to_string(readers_left[state]) +
           " GET(s) of it unable to read it, the last: " + Describe(*ops[last].src, origin);
    }
    if (std::find(best_states.begin(), best_states.end(), s) == best_states.end())
      best_states.push_back(s);
  }

  // A diagnosis for the explanation (the search decides): a GET that returned value v although
  // an acknowledged write w was called after PUT(v) returned and returned before the GET was
  // called. Values are unique, so v was overwritten for good: a stale read. The earliest such
  // GET, or "".
  std::string DefiniteStaleRead() const {
    std::vector<int32_t> writes, put_of(value_put.size(), -1);
    for (int32_t i = 0; i < n; ++i) {
      if (ops[i].kind == Kind::kPut) put_of[ops[i].val] = i;
      if (ops[i].kind == Kind::kPut || ops[i].kind == Kind::kDelOk) writes.push_back(i);
    }
    // suffix[j]: the write among writes[j..] that returned first.
    std::vector<int32_t> suffix(writes.size() + 1, -1);
    for (size_t j = writes.size(); j-- > 0;)
      suffix[j] = suffix[j + 1] >= 0 && ops[suffix[j + 1]].ret < ops[writes[j]].ret ? suffix[j + 1]
                                                                                    : writes[j];
    for (int32_t i = 0; i < n; ++i) {
      if (ops[i].kind != Kind::kGet || put_of[ops[i].val] < 0) continue;
      int64_t put_ret = ops[put_of[ops[i].val]].ret;
      size_t j = size_t(std::upper_bound(writes.begin(), writes.end(), put_ret,
                                         [&](int64_t t, int32_t w) { return t < ops[w].call; }) -
                        writes.begin());
      int32_t w = suffix[j];
      if (w >= 0 && ops[w].ret < ops[i].call)
        return "    stale read: " + Describe(*ops[i].src, origin) + " began after " +
               Describe(*ops[w].src, origin) + " returned, which began after " +
               Describe(*ops[put_of[ops[i].val]].src, origin) + " returned\n";
    }
    return "";
  }

  // Another diagnosis: a GET -> NOT_FOUND or DELETE -> NOT_FOUND that began after an
  // acknowledged PUT w returned, while no DELETE (acknowledged OK, or of unknown outcome) could
  // take effect between w and it. The earliest such op, or "".
  std::string DefiniteNotFound() const {
    std::vector<const SOp*> dels;
    for (const SOp& o : ops)
      if (o.kind == Kind::kDelOk) dels.push_back(&o);
    for (const SOp& o : free_dels) dels.push_back(&o);
    int32_t w = -1;  // among PUTs that returned so far, the one called last
    std::vector<int32_t> by_ret(static_cast<size_t>(n));
    for (int32_t i = 0; i < n; ++i) by_ret[size_t(i)] = i;
    std::sort(by_ret.begin(), by_ret.end(),
              [&](int32_t a, int32_t b) { return ops[a].ret < ops[b].ret; });
    size_t r = 0;
    for (int32_t i = 0; i < n; ++i) {  // by call time
      const SOp& g = ops[i];
      for (; r < by_ret.size() && ops[by_ret[r]].ret < g.call; ++r)
        if (ops[by_ret[r]].kind == Kind::kPut && (w < 0 || ops[by_ret[r]].call > ops[w].call))
          w = by_ret[r];
      if ((g.kind != Kind::kGetNf && g.kind != Kind::kDelNf) || w < 0) continue;
      bool deletable = false;  // a DELETE that may take effect after w and before g
      for (const SOp* d : dels)
        if (d->call <= g.ret && (d->kind == Kind::kFreeDel || d->ret >= ops[w].call)) {
          deletable = true;
          break;
        }
      if (!deletable)
        return "    NOT_FOUND while present: " + Describe(*g.src, origin) + " began after " +
               Describe(*ops[w].src, origin) + " returned, and no DELETE can come between\n";
    }
    return "";
  }

  KeyVerdict Violation(KeyVerdict v, std::string why) {
    v.verdict = Verdict::kViolation;
    v.explanation = std::move(why);
    return v;
  }

  KeyVerdict Run() {
    KeyVerdict v;
    v.key = key;
    // Values: token -> value id, one per PUT.
    std::unordered_map<std::string, int32_t> ids;
    for (const Op* op : input) {
      if (op->type != OpType::kPut || op->outcome == Outcome::kFailed) continue;
      auto [it, fresh] = ids.emplace(op->value, int32_t(value_put.size()));
      if (!fresh) {
        v.verdict = Verdict::kInconclusive;
        v.explanation = "    malformed history: two PUTs of the same value: " +
                        Describe(*value_put[it->second], origin) + " and " + Describe(*op, origin);
        return v;
      }
      value_put.push_back(op);
    }
    std::vector<int64_t> first_read_return(value_put.size(), kInf);
    for (const Op* op : input) {
      if (op->outcome == Outcome::kFailed) continue;
      if (op->type == OpType::kGet && op->outcome == Outcome::kUnknown) continue;
      ++v.ops_checked;
      if (op->type != OpType::kGet || op->outcome != Outcome::kOk) continue;
      auto it = ids.find(op->value);
      if (it == ids.end())
        return Violation(
            v, "    " + Describe(*op, origin) + " read a value that no PUT of this key wrote");
      const Op* put = value_put[it->second];
      if (op->return_ns < put->call_ns)
        return Violation(
            v, "    " + Describe(*op, origin) +
                   " returned a value before its PUT was called: " + Describe(*put, origin));
      first_read_return[it->second] = std::min(first_read_return[it->second], op->return_ns);
    }
    readers_left.assign(value_put.size(), 0);
    for (const Op* op : input) {
      if (op->outcome == Outcome::kFailed) continue;
      SOp s;
      s.call = op->call_ns;
      s.ret = op->return_ns;
      s.src = op;
      switch (op->type) {
        case OpType::kPut: {
          s.val = ids[op->value];
          s.kind = Kind::kPut;
          if (op->outcome != Outcome::kOk) {
            if (first_read_return[s.val] == kInf) {
              s.kind = Kind::kFreePut;
              free_puts.push_back(s);
              continue;
            }
            s.ret = first_read_return[s.val];  // it took effect before that GET returned
          }
          break;
        }
        case OpType::kDelete:
          if (op->outcome == Outcome::kUnknown) {
            s.kind = Kind::kFreeDel;
            free_dels.push_back(s);
            continue;
          }
          s.kind = op->outcome == Outcome::kOk ? Kind::kDelOk : Kind::kDelNf;
          break;
        case OpType::kGet:
          if (op->outcome == Outcome::kUnknown) continue;
          if (op->outcome == Outcome::kOk) {
            s.kind = Kind::kGet;
            s.val = ids[op->value];
            ++readers_left[s.val];
          } else {
            s.kind = Kind::kGetNf;
          }
          break;
      }
      ops.push_back(s);
    }
    auto by_call = [](const SOp& a, const SOp& b) {
      return a.call != b.call ? a.call < b.call : a.ret < b.ret;
    };
    std::sort(ops.begin(), ops.end(), by_call);
    std::sort(free_puts.begin(), free_puts.end(), by_call);
    std::sort(free_dels.begin(), free_dels.end(), by_call);
    n = int32_t(ops.size());
    if (n == 0) return v;
    calls.resize(size_t(n));
    for (int32_t i = 0; i < n; ++i) calls[size_t(i)] = ops[size_t(i)].call;
    next.resize(size_t(n) + 1);
    prev.resize(size_t(n) + 1);
    for (int32_t i = 0; i <= n; ++i) {
      next[size_t(i)] = i == n ? 0 : i + 1;
      prev[size_t(i)] = i == 0 ? n : i - 1;
    }
    while (leaves < size_t(n)) leaves *= 2;
    tree.assign(2 * leaves, {kInf, 0});
    for (int32_t i = 0; i < n; ++i) tree[leaves + size_t(i)] = {ops[size_t(i)].ret, i};
    for (size_t p = leaves - 1; p >= 1; --p) tree[p] = std::min(tree[2 * p], tree[2 * p + 1]);
    bits.assign((size_t(n) + 64) / 64, 0);

    state = kAbsent;
    Closure();
    if (nlin == n) return v;
    std::vector<Frame> frames(1);
    frames[0].choices = Choices();
    if (frames[0].choices.empty()) RecordDeadEnd();
    while (true) {
      Frame& f = frames.back();
      if (f.next < f.choices.size()) {
        Choice c = f.choices[f.next++];
        Frame child;
        Apply(c, &child);
        Closure();
        if (nlin == n) {
          v.states_explored = steps;
          return v;
        }
        if (++steps > max_states) {
          v.states_explored = steps;
          // The search gave up; a definite violation still decides.
          std::string definite = DefiniteStaleRead() + DefiniteNotFound();
          if (!definite.empty())
            return Violation(v, definite + "    (found without the search, which gave up after " +
                                    std::to_string(max_states) + " states)");
          v.verdict = Verdict::kInconclusive;
          v.explanation = "    search gave up after " + std::to_string(max_states) +
                          " states; deepest point reached: " + std::to_string(best_nlin) + " of " +
                          std::to_string(n) + " ops linearized";
          return v;
        }
        std::string k = Key();
        if (dead.count(k)) {
          Undo(child);
          continue;
        }
        child.choices = Choices();
        if (child.choices.empty()) {
          RecordDeadEnd();
          dead.insert(std::move(k));
          Undo(child);
          continue;
        }
        frames.push_back(std::move(child));
      } else {
        if (frames.size() == 1) break;
        dead.insert(Key());
        Undo(frames.back());
        frames.pop_back();
      }
    }
    v.states_explored = steps;
    std::string e = DefiniteStaleRead() + DefiniteNotFound();
    e += "    no linearization: at most " + std::to_string(best_nlin) + " of " + std::to_string(n) +
         " ops can be linearized; then this op cannot be:\n" + "      " +
         Describe(*ops[size_t(best_blocked)].src, origin) + "\n";
    e += "    possible states of the register at that point:\n";
    for (const std::string& s : best_states) e += "      " + s + "\n";
    if (!best_concurrent.empty()) {
      e += "    ops concurrent with it, not yet linearized:\n";
      for (int32_t i : best_concurrent)
        e += "      " + Describe(*ops[size_t(i)].src, origin) + "\n";
    }
    if (!free_puts.empty() || !free_dels.empty())
      e += "    (plus " + std::to_string(free_puts.size() + free_dels.size()) +
           " unknown-outcome PUTs/DELETEs that may or may not have taken effect)\n";
    e.pop_back();
    return Violation(v, e);
  }
};

RegisterSearch::RegisterSearch(std::string key, std::vector<const Op*> ops, int64_t origin_ns,
                               uint64_t max_states)
    : impl_(new Impl) {
  impl_->key = std::move(key);
  impl_->input = std::move(ops);
  impl_->origin = origin_ns;
  impl_->max_states = max_states;
}

RegisterSearch::~RegisterSearch() = default;

KeyVerdict RegisterSearch::Run() { return impl_->Run(); }

}  // namespace rkv::lincheck
