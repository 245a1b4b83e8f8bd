// POSIX file helpers for the checkpoint layer: an owning file descriptor with positioned,
// complete reads and writes (EINTR and short transfers retried), fsync, directory operations
// and the atomic directory swap. Every failure throws dtensor::Error "[op] <path>: <strerror>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dtensor::checkpoint::detail {

class File {
 public:
  // Opens `path` for reading, or creates/truncates it for writing (mode 0644), or opens an
  // existing file for writing without truncating it (several ranks writing parts of one file).
  static File open_read(const std::string& path, std::string_view op);
  static File create(const std::string& path, std::string_view op);
  static File open_write(const std::string& path, std::string_view op);
  File() = default;
  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const;
  // Reads exactly n bytes at `offset`; throws "... truncated" when the file ends first.
  void pread_all(void* buf, size_t n, uint64_t offset) const;
  void pwrite_all(const void* buf, size_t n, uint64_t offset) const;
  // The same, returning the CRC-32 of the bytes (zlib's CRC-32, the gzip/PNG polynomial; ISA-L
  // computes it): the transfer goes in blocks of a few MB and each block is checksummed right after
  // it moved, while it is still in the CPU cache (one pass over memory instead of two).
  uint32_t pread_all_crc(void* buf, size_t n, uint64_t offset) const;
  uint32_t pwrite_all_crc(const void* buf, size_t n, uint64_t offset) const;
  // fsync(2): the data is on disk before the checkpoint is committed.
  void sync() const;
  // ftruncate(2): sets the file's size (a longer file reads as zeros until written).
  void resize(uint64_t size) const;

 private:
  // open(2) with `flags` (and O_CLOEXEC; mode 0644 when it creates); throws "[op] <what> ...".
  static File open(const std::string& path, int flags, std::string_view op, const char* what);

  int fd_ = -1;
  std::string path_;
  std::string op_;
};

// The whole of a small file (an index, a config) as text.
std::string read_text_file(const std::string& path, std::string_view op);

bool path_exists(const std::string& path);
bool is_directory(const std::string& path);
// Creates one directory (the parent must exist).
void make_directory(const std::string& path, std::string_view op);
// Removes a file or a directory tree; nothing when it does not exist.
void remove_tree(const std::string& path, std::string_view op);
// fsync of a directory, so that renames and new entries in it are durable.
void sync_directory(const std::string& path, std::string_view op);
// Puts directory `from` at `to`. When `to` exists the two are exchanged, so `from` then holds
// the old contents: atomically with renameat2(RENAME_EXCHANGE) where the filesystem supports
// it (`to` is never missing); where it does not (NFS, FUSE: EINVAL), or with
// DTENSOR_CKPT_NO_EXCHANGE=1, by three renames through `to.old`, during which `to` is briefly
// missing and the previous checkpoint lies complete at `to.old`. Otherwise a plain rename.
void swap_into_place(const std::string& from, const std::string& to, std::string_view op);
// The parent directory of `path` ("." when it has none).
std::string parent_directory(const std::string& path);
// Whether a directory has no entries.
bool directory_is_empty(const std::string& path, std::string_view op);

}  // namespace dtensor::checkpoint::detail
