import Foundation

extension MirrorgateConfiguration {
    /// The built-in demo configuration: the exact text of `config/demo.yaml` (a test keeps them equal).
    public static let demoYAML: String = """
        # Mirrorgate demo configuration. It is compiled into the binary: `mirrorgate serve` uses it when no
        # --config is given and config/mirrorgate.yaml does not exist. Keep it identical to
        # MirrorgateConfiguration.demoYAML (a unit test compares them).
        #
        # The upstreams point at port 9 on loopback, where nothing listens, so every answer comes from the
        # local data bootstrapped from config/demo/ (paths below are relative to this file's directory).
        server:
          listen: 127.0.0.1:8080
        dataDir: ./mirrorgate-data

        algolia:
          appId: DEMOAPP
          apiKey: demo-search-key
          hosts: ["http://127.0.0.1:9"]
          indices:
            # A mirrored index: its upstream is unreachable here, so requests fall back to the mirror, which is
            # bootstrapped from bundled data (answers carry "origin":"local").
            demo_mirror:
              mirrored: true
              requestStrategy: fallbackOnFailure
              dataSelectionQueries:
                - {query: {query: ""}, maxObjects: 1000}
              bootstrap:
                settings: demo/packages.settings.json
                objects: [demo/packages.json]
          offlineIndices:
            demo_packages:
              bootstrap:
                settings: demo/packages.settings.json
                objects: [demo/packages.json]

        odata:
          services:
            demo:
              mount: /odata/demo/
              upstream: http://127.0.0.1:9/odata/
              routing: localFirst
              # A mirrored OData V4 service bootstrapped from bundled data (answers carry
              # X-Mirrorgate-Origin: local): /odata/demo/Customers?$expand=Orders
              bootstrap:
                metadata: demo/odata/metadata.xml
                data: {Customers: demo/odata/customers.json, Orders: demo/odata/orders.json}

        """
}

extension MirrorgateConfiguration {
    /// The built-in demo's bootstrap files, compiled in (`DemoFiles.swift`, generated from `config/demo/`):
    /// path relative to the demo configuration's directory (e.g. `demo/packages.json`) → bytes.
    public static var demoFiles: [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for (path, base64) in DemoFileData.base64 {
            guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
                preconditionFailure("DemoFiles.swift: \(path) is not base64; run scripts/gen-demo-files.sh")
            }
            files[path] = [UInt8](data)
        }
        return files
    }

    /// Writes `demoFiles` into a new private directory (mode 0700, files 0600) under `parent` and returns
    /// its path: the `baseDirectory` the built-in demo's bootstrap paths resolve against, so that the demo
    /// runs from any working directory and in a container, with no checkout around it. The caller
    /// removes the directory when the gateway stops.
    public static func writeDemoFiles(under parent: String = NSTemporaryDirectory()) throws -> String {
        let base = parent.hasSuffix("/") ? parent : parent + "/"
        var template = Array((base + "mirrorgate-demo.XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: base])
        }
        let directory = String(
            decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        do {
            for (path, bytes) in demoFiles.sorted(by: { $0.key < $1.key }) {
                let url = URL(fileURLWithPath: directory).appendingPathComponent(path)
                try FileManager.default.createDirectory(
                    at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
                guard
                    FileManager.default.createFile(
                        atPath: url.path, contents: Data(bytes), attributes: [.posixPermissions: 0o600])
                else {
                    throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: url.path])
                }
            }
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        return directory
    }
}
