import Foundation
import Testing

@testable import GatewayConfig

private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

private func scratch() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mg-files-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

@Suite struct DemoFilesTests {
    /// The compiled-in copy is the folder's content, byte for byte (`scripts/gen-demo-files.sh` regenerates).
    @Test func compiledInFilesAreConfigDemo() throws {
        let demo = root.appendingPathComponent("config/demo")
        var onDisk: [String: [UInt8]] = [:]
        let walker = try #require(FileManager.default.enumerator(at: demo, includingPropertiesForKeys: nil))
        for case let url as URL in walker where url.lastPathComponent != "README.md" {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory),
                !isDirectory.boolValue
            else { continue }
            let relative = String(
                url.standardizedFileURL.path.dropFirst(demo.standardizedFileURL.path.count + 1))
            onDisk["demo/" + relative] = [UInt8](try Data(contentsOf: url))
        }
        #expect(onDisk.count >= 5)
        let compiled = MirrorgateConfiguration.demoFiles
        #expect(
            compiled.keys.sorted() == onDisk.keys.sorted(),
            "run scripts/gen-demo-files.sh after changing config/demo/")
        for (path, bytes) in onDisk {
            #expect(compiled[path] == bytes, "\(path) differs: run scripts/gen-demo-files.sh")
        }
    }

    /// Every bootstrap file the demo names is among the compiled-in files, so the demo needs no checkout.
    @Test func demoNamesOnlyCompiledInFiles() throws {
        let demo = try MirrorgateConfiguration.parse(
            yaml: MirrorgateConfiguration.demoYAML, fileName: "<demo>", environment: [:])
        let named = demo.bootstrapFileKeys().map(\.path)
        #expect(named.count == 7)
        #expect(Set(named).subtracting(MirrorgateConfiguration.demoFiles.keys).isEmpty)
    }

    @Test func writtenFilesArePrivateAndCheckClean() throws {
        let parent = try scratch()
        defer { try? FileManager.default.removeItem(at: parent) }
        let dir = try MirrorgateConfiguration.writeDemoFiles(under: parent.path)
        #expect(dir.hasPrefix(parent.path + "/mirrorgate-demo."))
        let dirMode = try FileManager.default.attributesOfItem(atPath: dir)[.posixPermissions] as? Int
        #expect(dirMode == 0o700)
        var demo = try MirrorgateConfiguration.parse(
            yaml: MirrorgateConfiguration.demoYAML, fileName: "<demo>", environment: [:])
        demo.baseDirectory = dir
        demo.dataDir = parent.appendingPathComponent("data").path
        #expect(demo.fileIssues(file: "<demo>") { _ in nil }.isEmpty)
        for (path, bytes) in MirrorgateConfiguration.demoFiles {
            let file = dir + "/" + path
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: file))) == bytes)
            let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(path)")
        }
        // two gateways never share (or clobber) one directory
        let other = try MirrorgateConfiguration.writeDemoFiles(under: parent.path)
        #expect(other != dir)
    }
}

@Suite struct FileChecksTests {
    @Test func missingAndUnreadableBootstrapFilesAreReportedAtTheirLine() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("{}".utf8).write(to: dir.appendingPathComponent("settings.json"))
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("adir.json"), withIntermediateDirectories: true)
        let yaml = """
            dataDir: \(dir.path)/data
            algolia:
              appId: A
              apiKey: k
              offlineIndices:
                local:
                  bootstrap:
                    settings: settings.json
                    objects: [missing.json]
            odata:
              services:
                s:
                  upstream: http://127.0.0.1:9/
                  bootstrap:
                    metadata: adir.json
                    data: {Customers: /nonexistent/customers.json}

            """
        let file = dir.appendingPathComponent("mg.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        // a plain load (serve) does not look at the files
        _ = try MirrorgateConfiguration.load(path: file, environment: [:])
        let error = try #require(throws: ConfigError.self) {
            try MirrorgateConfiguration.load(path: file, environment: [:], fileChecks: .all)
        }
        let lines = error.issues.map(\.description)
        #expect(lines.count == 3, "\(lines)")
        #expect(
            lines.contains(
                "\(file):9: algolia.offlineIndices.local.bootstrap.objects: bootstrap file 'missing.json' "
                    + "does not exist (looked for \(dir.path)/missing.json)"), "\(lines)")
        #expect(
            lines.contains(
                "\(file):15: odata.services.s.bootstrap.metadata: bootstrap file 'adir.json' is a directory "
                    + "(\(dir.path)/adir.json)"), "\(lines)")
        #expect(
            lines.contains(where: {
                $0.hasPrefix("\(file):16: odata.services.s.bootstrap.data.Customers: bootstrap file ")
                    && $0.contains("does not exist")
            }), "\(lines)")
    }

    @Test func dataDirThatCannotBeCreatedIsReportedAtItsLine() throws {
        let dir = try scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("x".utf8).write(to: dir.appendingPathComponent("plain"))
        let file = dir.appendingPathComponent("mg.yaml").path
        try "log: {level: info}\ndataDir: \(dir.path)/plain/data\n".write(
            toFile: file, atomically: true, encoding: .utf8)
        let error = try #require(throws: ConfigError.self) {
            try MirrorgateConfiguration.load(path: file, environment: [:], fileChecks: .all)
        }
        #expect(
            error.description
                == "\(file):2: dataDir: '\(dir.path)/plain/data' cannot be created: \(dir.path)/plain is not a "
                + "directory")
        // a file where the directory should be
        var c = MirrorgateConfiguration()
        c.dataDir = dir.appendingPathComponent("plain").path
        #expect(
            c.dataDirIssues(file: "--data-dir").map(\.description) == [
                "--data-dir: dataDir: '\(c.dataDir)' is not a directory (\(c.dataDir))"
            ])
        // an existing directory, and one that serve will create inside it, are fine
        c.dataDir = dir.path
        #expect(c.dataDirIssues(file: "x").isEmpty)
        c.dataDir = dir.appendingPathComponent("new/deeper").path
        #expect(c.dataDirIssues(file: "x").isEmpty)
    }

    /// The container image's configuration serves the demo's indices and service from the demo's files
    /// (copied to /usr/share/mirrorgate/demo), on 0.0.0.0 with allowRemote and the token from the environment.
    @Test func containerConfigurationIsTheDemoOnEveryInterface() throws {
        let path = root.appendingPathComponent("docker/mirrorgate.yaml").path
        let missingToken = try #require(throws: ConfigError.self) {
            try MirrorgateConfiguration.load(path: path, environment: [:])
        }
        #expect(missingToken.description.contains("MIRRORGATE_ADMIN_TOKEN"))
        let c = try MirrorgateConfiguration.load(path: path, environment: ["MIRRORGATE_ADMIN_TOKEN": "t"])
        #expect(c.server.listen == ListenAddress(host: "0.0.0.0", port: 8080))
        #expect(c.server.allowRemote)
        #expect(c.admin.token == "t")
        #expect(c.dataDir == "/var/lib/mirrorgate")
        let demo = try MirrorgateConfiguration.parse(
            yaml: MirrorgateConfiguration.demoYAML, fileName: "<demo>", environment: [:])
        #expect(c.algolia.indices.keys.sorted() == demo.algolia.indices.keys.sorted())
        #expect(c.algolia.offlineIndices.keys.sorted() == demo.algolia.offlineIndices.keys.sorted())
        #expect(c.odata.services.keys.sorted() == demo.odata.services.keys.sorted())
        let image = c.bootstrapFileKeys().map { ($0.key, $0.path) }
        let local = demo.bootstrapFileKeys().map { ($0.key, "/usr/share/mirrorgate/" + $0.path) }
        #expect(image.map(\.0) == local.map(\.0))
        #expect(image.map(\.1) == local.map(\.1))
    }
}
