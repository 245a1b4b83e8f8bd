#include "dtensor/checkpoint/detail/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <isa-l/crc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>

#include "dtensor/tensor/error.h"

namespace dtensor::checkpoint::detail {

namespace {

[[noreturn]] void fail_errno(std::string_view op, const std::string& path, const char* what) {
  DT_FAIL("[%s] %s '%s': %s", op, what, path, std::strerror(errno));
}

}  // namespace

File File::open(const std::string& path, int flags, std::string_view op, const char* what) {
  File f;
  f.path_ = path;
  f.op_ = std::string(op);
  f.fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (f.fd_ < 0) fail_errno(op, path, what);
  return f;
}

File File::open_read(const std::string& path, std::string_view op) {
  return open(path, O_RDONLY, op, "cannot open");
}

File File::create(const std::string& path, std::string_view op) {
  return open(path, O_WRONLY | O_CREAT | O_TRUNC, op, "cannot create");
}

File File::open_write(const std::string& path, std::string_view op) {
  return open(path, O_WRONLY, op, "cannot open for writing");
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)), op_(std::move(o.op_)) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    op_ = std::move(o.op_);
  }
  return *this;
}

uint64_t File::size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) fail_errno(op_, path_, "cannot stat");
  return static_cast<uint64_t>(st.st_size);
}

void File::pread_all(void* buf, size_t n, uint64_t offset) const {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    // Linux transfers at most ~2 GiB per call; larger requests come back short and loop.
    const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail_errno(op_, path_, "cannot read");
    }
    DT_CHECK(got > 0, "[%s] file '%s' is truncated: it ends at byte %d, %d bytes short of byte %d",
             op_, path_, offset, n, offset + n);
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
}

void File::pwrite_all(const void* buf, size_t n, uint64_t offset) const {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t put = ::pwrite(fd_, p, n, static_cast<off_t>(offset));
    if (put < 0) {
      if (errno == EINTR) continue;
      fail_errno(op_, path_, "cannot write");
    }
    p += put;
    n -= static_cast<size_t>(put);
    offset += static_cast<uint64_t>(put);
  }
}

namespace {

// Moves n bytes in blocks of a few MB with `move(index in p, length, file offset)` and
// checksums each block right after it moved, while it is still in the CPU cache.
template <typename Move>
uint32_t transfer_with_crc(const char* p, size_t n, uint64_t offset, Move&& move) {
  constexpr size_t kBlock = size_t{4} << 20;
  uint32_t crc = 0;
  for (size_t done = 0; done < n;) {
    const size_t len = std::min(kBlock, n - done);
    move(done, len, offset + done);
    crc = ::crc32_gzip_refl(crc, reinterpret_cast<const unsigned char*>(p + done), len);
    done += len;
  }
  return crc;
}

}  // namespace

uint32_t File::pread_all_crc(void* buf, size_t n, uint64_t offset) const {
  char* p = static_cast<char*>(buf);
  return transfer_with_crc(
      p, n, offset, [&](size_t at, size_t len, uint64_t off) { pread_all(p + at, len, off); });
}

uint32_t File::pwrite_all_crc(const void* buf, size_t n, uint64_t offset) const {
  const char* p = static_cast<const char*>(buf);
  return transfer_with_crc(
      p, n, offset, [&](size_t at, size_t len, uint64_t off) { pwrite_all(p + at, len, off); });
}

void File::sync() const {
  if (::fsync(fd_) != 0) fail_errno(op_, path_, "cannot fsync");
}

void File::resize(uint64_t size) const {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail_errno(op_, path_, "cannot resize");
}

std::string read_text_file(const std::string& path, std::string_view op) {
  const File f = File::open_read(path, op);
  std::string text(f.size(), '\0');
  f.pread_all(text.data(), text.size(), 0);
  return text;
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void make_directory(const std::string& path, std::string_view op) {
  if (::mkdir(path.c_str(), 0755) != 0) fail_errno(op, path, "cannot create directory");
}

void remove_tree(const std::string& path, std::string_view op) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  DT_CHECK(!ec, "[%s] cannot remove '%s': %s", op, path, ec.message());
}

void sync_directory(const std::string& path, std::string_view op) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_errno(op, path, "cannot open directory");
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (rc != 0) fail_errno(op, path, "cannot fsync directory");
}

namespace {

// RENAME_EXCHANGE needs filesystem support: NFS, most FUSE filesystems and some others answer
// EINVAL (ENOSYS on kernels before 3.15). DTENSOR_CKPT_NO_EXCHANGE=1 takes the fallback
// anyway, which is how the tests reach it on a local disk.
bool exchange_unsupported(int err) {
  return err == EINVAL || err == ENOSYS;
}

bool exchange_disabled() {
  const char* v = std::getenv("DTENSOR_CKPT_NO_EXCHANGE");
  return v != nullptr && std::string_view(v) == "1";
}

}  // namespace

void swap_into_place(const std::string& from, const std::string& to, std::string_view op) {
  if (!path_exists(to)) {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      fail_errno(op, to, "cannot rename the new checkpoint to");
    }
    return;
  }
  if (!exchange_disabled()) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) return;
    if (!exchange_unsupported(errno)) fail_errno(op, to, "cannot exchange the new checkpoint with");
  }
  // Three renames. Between the first two `to` does not exist and the previous checkpoint is
  // complete at `to.old` (docs/CHECKPOINT.md says how to recover from a crash there).
  const std::string old = to + ".old";
  if (path_exists(old)) remove_tree(old, op);
  if (::rename(to.c_str(), old.c_str()) != 0) {
    fail_errno(op, to, "cannot move the previous checkpoint aside from");
  }
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int err = errno;
    (void)::rename(old.c_str(), to.c_str());  // put the previous checkpoint back
    errno = err;
    fail_errno(op, to, "cannot rename the new checkpoint to");
  }
  if (::rename(old.c_str(), from.c_str()) != 0) {
    fail_errno(op, old, "cannot move the previous checkpoint for removal from");
  }
}

std::string parent_directory(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

bool directory_is_empty(const std::string& path, std::string_view op) {
  std::error_code ec;
  const bool empty = std::filesystem::is_empty(path, ec);
  DT_CHECK(!ec, "[%s] cannot list '%s': %s", op, path, ec.message());
  return empty;
}

}  // namespace dtensor::checkpoint::detail
