#include "client/device_form.h"

#include <mutex>
#include <unordered_map>
#include <utility>

namespace rsc::client {

namespace {

struct DigestHash {
  size_t operator()(const Digest128& d) const { return static_cast<size_t>(d.lo); }
};

// Forms by digest, held weakly: a form lives as long as some DeviceRef holds it. Expired slots
// are swept when the table has doubled since the last sweep, so it stays within twice the live
// forms (plus a floor) without a callback on every release.
class Interner {
 public:
  std::shared_ptr<const DeviceForm> intern(DeviceForm::Parts&& parts) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = forms_.find(parts.digest);
    if (it != forms_.end()) {
      if (auto held = it->second.lock(); held != nullptr && held->json() == parts.json) {
        return held;
      }
    }
    auto form = std::make_shared<const DeviceForm>(std::move(parts));
    if (it != forms_.end()) {
      it->second = form;
    } else {
      forms_.emplace(form->digest(), form);
      if (forms_.size() >= sweep_at_) sweep();
    }
    return form;
  }

  std::shared_ptr<const DeviceForm> find(const Digest128& digest, std::string_view json) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = forms_.find(digest);
    if (it == forms_.end()) return nullptr;
    auto held = it->second.lock();
    return held != nullptr && held->json() == json ? held : nullptr;
  }

  DeviceFormStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceFormStats s;
    s.entries = forms_.size();
    for (const auto& [digest, form] : forms_) s.live += form.expired() ? 0 : 1;
    return s;
  }

 private:
  static constexpr size_t kMinSweep = 1024;

  void sweep() {
    std::erase_if(forms_, [](const auto& entry) { return entry.second.expired(); });
    sweep_at_ = std::max(kMinSweep, 2 * forms_.size());
  }

  std::mutex mu_;
  std::unordered_map<Digest128, std::weak_ptr<const DeviceForm>, DigestHash> forms_;
  size_t sweep_at_ = kMinSweep;
};

Interner& interner() {
  static auto* table = new Interner();  // never destroyed: forms may outlive main
  return *table;
}

const SipHashKey& digestKey() {
  static const SipHashKey key = SipHashKey::random();
  return key;
}

}  // namespace

std::shared_ptr<const DeviceForm> DeviceRef::intern(DeviceForm::Parts&& parts) {
  parts.digest = sipHash128(digestKey(), parts.json);
  return interner().intern(std::move(parts));
}

DeviceRef DeviceRef::interned(std::string_view json) {
  DeviceRef ref;
  ref.form_ = interner().find(sipHash128(digestKey(), json), json);
  return ref;
}

bool operator==(const DeviceRef& a, const DeviceRef& b) {
  if (a.form_ == b.form_) return true;
  if (a.form_ == nullptr || b.form_ == nullptr) return false;
  return a.form_->digest() == b.form_->digest();
}

DeviceFormStats deviceFormStats() { return interner().stats(); }

}  // namespace rsc::client
