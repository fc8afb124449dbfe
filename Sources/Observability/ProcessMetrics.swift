import Foundation
import Glibc

/// The `process_*` metrics of the Prometheus client conventions, read from `/proc/self` at each scrape:
/// CPU time, resident and virtual memory, open and maximum file descriptors, start time.
public enum ProcessMetrics {
    /// The families (empty where `/proc` cannot be read).
    public static func families() -> [ScrapeFamily] {
        var out: [ScrapeFamily] = []
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let stat = statFields()
        if let stat, stat.count > 21, ticks > 0 {
            let utime = Double(stat[11]) ?? 0
            let stime = Double(stat[12]) ?? 0
            out.append(
                family(
                    "process_cpu_seconds_total", "counter",
                    "Total user and system CPU time spent in seconds.",
                    (utime + stime) / ticks))
            if let start = Double(stat[19]), let boot = bootTime() {
                out.append(
                    family(
                        "process_start_time_seconds", "gauge",
                        "Start time of the process since unix epoch in seconds.", boot + start / ticks))
            }
            if let vsize = Double(stat[20]) {
                out.append(
                    family(
                        "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize))
            }
            if stat.count > 21, let rss = Double(stat[21]) {
                out.append(
                    family(
                        "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                        rss * Double(sysconf(Int32(_SC_PAGESIZE)))))
            }
        }
        if let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            out.append(
                family("process_open_fds", "gauge", "Number of open file descriptors.", Double(fds.count)))
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            out.append(
                family(
                    "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                    Double(limit.rlim_cur)))
        }
        return out
    }

    private static func family(_ name: String, _ type: String, _ help: String, _ value: Double)
        -> ScrapeFamily
    {
        ScrapeFamily(name: name, type: type, help: help, samples: [([], value)])
    }

    /// The fields of `/proc/self/stat` after the command name (field 3, the state, is index 0).
    static func statFields() -> [String]? {
        guard let text = readFile("/proc/self/stat"),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ").map(String.init)
    }

    /// The boot time (`btime` of `/proc/stat`), seconds since the epoch.
    private static func bootTime() -> Double? {
        guard let text = readFile("/proc/stat") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }

    /// A whole file read with `read(2)` (files under `/proc` report a size of 0).
    static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<256 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            bytes.append(contentsOf: chunk[0..<n])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
