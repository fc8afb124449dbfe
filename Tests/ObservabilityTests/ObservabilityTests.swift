import Foundation
import Logging
import Testing

@testable import Observability

/// Log lines that tools read, and metrics with help.
@Suite struct ObservabilityTests {
    func event(_ message: String) -> LogEvent {
        LogEvent(
            level: .info, message: "\(message)", metadata: nil, source: "t", file: "f", function: "g", line: 1
        )
    }

    @Test func jsonLinesKeepNumbersAndBooleansTyped() throws {
        let line = LineOutput.line(
            label: "mirrorgate.access", event: event("GET /x 200"),
            metadata: [
                "status": .stringConvertible(200), "duration_ms": .stringConvertible(1.25),
                "cached": .stringConvertible(true), "path": "/x",
                "list": .array(["a", .stringConvertible(2)]),
            ], json: true, time: "2026-01-01T00:00:00.000Z")
        #expect(line.hasSuffix("\n"))
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(doc["status"] as? Int == 200)
        #expect(doc["duration_ms"] as? Double == 1.25)
        #expect(doc["cached"] as? Bool == true)
        #expect(doc["path"] as? String == "/x")
        #expect(doc["message"] as? String == "GET /x 200" && doc["logger"] as? String == "mirrorgate.access")
    }

    @Test func textLinesAreLogfmt() {
        let line = LineOutput.line(
            label: "mirrorgate", event: event("say \"hi\"\nnow"),
            metadata: ["a": "plain", "b": "two words", "c": "", "d=e": "x=y", "n": .stringConvertible(3)],
            json: false, time: "2026-01-01T00:00:00.000Z")
        #expect(
            line
                == #"time=2026-01-01T00:00:00.000Z level=info logger=mirrorgate msg="say \"hi\"\nnow" a=plain b="two words" c="" d_e="x=y" n=3"#
                + "\n")
    }

    @Test func everyFamilyGetsHelpBeforeItsType() {
        let text = """
            # TYPE mirrorgate_requests_total counter
            mirrorgate_requests_total{route="a"} 1
            # TYPE something_unknown gauge
            something_unknown 2
            # HELP already_helped Has help.
            # TYPE already_helped gauge
            already_helped 3

            """
        let out = GatewayMetrics.addingHelp(to: text)
        #expect(out.contains("# HELP mirrorgate_requests_total Requests answered"))
        #expect(
            out.contains(
                "# HELP something_unknown Mirrorgate metric something_unknown.\n# TYPE something_unknown gauge"
            ))
        #expect(out.components(separatedBy: "# HELP already_helped").count == 2)
    }

    @Test func scrapeFamiliesRenderWithHelpTypeAndEscapedLabels() {
        var f = ScrapeFamily(name: "x_age_seconds", type: "gauge", help: "Age.")
        #expect(f.text.isEmpty, "no samples, no family")
        f.samples = [([("mirror", "odata:a\"b")], 1.5), ([], 2)]
        #expect(
            f.text
                == "# HELP x_age_seconds Age.\n# TYPE x_age_seconds gauge\nx_age_seconds{mirror=\"odata:a\\\"b\"} 1.5\nx_age_seconds 2\n"
        )
    }

    @Test func processMetricsReadProc() {
        let names = ProcessMetrics.families().map(\.name)
        #expect(names.contains("process_cpu_seconds_total") && names.contains("process_open_fds"))
        #expect(
            names.contains("process_resident_memory_bytes") && names.contains("process_start_time_seconds"))
    }

    @Test func upstreamTimeComesFromServerTiming() {
        #expect(AccessLine.upstreamMillis(["cache;desc=hit, upstream;dur=12.5"]) == 12.5)
        #expect(AccessLine.upstreamMillis(["upstream;dur=1", "upstream;dur=2"]) == 2)
        #expect(AccessLine.upstreamMillis(["db;dur=3"]) == nil)
    }
}
