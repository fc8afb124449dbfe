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
