#include "daemon/common/process_stats.h"

#include <dirent.h>

#include <fstream>
#include <string>

namespace xferd {

ProcessStats ReadProcessStats() {
  ProcessStats stats;
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    uint64_t value = 0;
    if (key == "VmRSS:" && status >> value) stats.resident_bytes = value * 1024;
    if (key == "VmHWM:" && status >> value) stats.peak_resident_bytes = value * 1024;
    if (key == "Threads:" && status >> value) stats.threads = static_cast<uint32_t>(value);
    status.ignore(4096, '\n');
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') ++stats.open_fds;
    }
    closedir(dir);
    if (stats.open_fds > 0) --stats.open_fds;  // the directory stream's own fd
  }
  return stats;
}

}  // namespace xferd
