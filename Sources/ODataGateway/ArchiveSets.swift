import Foundation
import GatewaySupport
import HTTPCore
import JSONCore
import ODataCore
import Storage

/// The ErrorArchive and RequestQueue of one OData service as OData entity sets (SAP's property names for
/// the ErrorArchive): their CSDL in either version, and the SQL each set is read from.
///
/// Promises: nothing of a queued request's credentials (`authorization`) is exposed; user text reaches
/// SQL only as bound parameters (via ``ODataSQLTranslator``).
public enum ODataArchiveSets {
    /// The schema namespace.
    public static let namespace = "Mirrorgate"
    /// The entity sets served.
    public static let names = ["ErrorArchive", "RequestQueue", "EventLog"]

    struct Property {
        let name: String
        let type: String
        let nullable: Bool
    }

    /// `(entity set, entity type, properties)`; the first property is the key.
    static let sets: [(set: String, type: String, properties: [Property])] = [
        (
            "ErrorArchive", "ErrorArchiveEntry",
            [
                Property(name: "RequestID", type: "Edm.String", nullable: false),
                Property(name: "CustomTag", type: "Edm.String", nullable: true),
                Property(name: "HTTPStatusCode", type: "Edm.Int32", nullable: false),
                Property(name: "Code", type: "Edm.String", nullable: true),
                Property(name: "Message", type: "Edm.String", nullable: true),
                Property(name: "InnerError", type: "Edm.String", nullable: true),
                Property(name: "Domain", type: "Edm.String", nullable: true),
                Property(name: "RequestMethod", type: "Edm.String", nullable: false),
                Property(name: "RequestURL", type: "Edm.String", nullable: false),
                Property(name: "RequestBody", type: "Edm.String", nullable: true),
                Property(name: "EntitySet", type: "Edm.String", nullable: false),
                Property(name: "ArchivedAt", type: "Edm.String", nullable: false),
            ]
        ),
        (
            "RequestQueue", "RequestQueueEntry",
            [
                Property(name: "RequestID", type: "Edm.String", nullable: false),
                Property(name: "ID", type: "Edm.Int64", nullable: false),
                Property(name: "RequestMethod", type: "Edm.String", nullable: false),
                Property(name: "RequestURL", type: "Edm.String", nullable: false),
                Property(name: "EntitySet", type: "Edm.String", nullable: false),
                Property(name: "CreatedAt", type: "Edm.String", nullable: false),
                Property(name: "RequestBody", type: "Edm.String", nullable: true),
                Property(name: "CustomTag", type: "Edm.String", nullable: true),
                Property(name: "Held", type: "Edm.Boolean", nullable: false),
                Property(name: "HeldBy", type: "Edm.String", nullable: true),
                Property(name: "TransactionID", type: "Edm.String", nullable: true),
                Property(name: "NonMergeable", type: "Edm.Boolean", nullable: false),
                Property(name: "RemoveAfterUpload", type: "Edm.Boolean", nullable: false),
                Property(name: "WaitingFor", type: "Edm.String", nullable: true),
                Property(name: "WaitingStatus", type: "Edm.Int32", nullable: true),
            ]
        ),
        (
            "EventLog", "EventLogEntry",
            [
                Property(name: "ID", type: "Edm.Int64", nullable: false),
                Property(name: "Type", type: "Edm.String", nullable: false),
                Property(name: "Time", type: "Edm.String", nullable: false),
                Property(name: "Details", type: "Edm.String", nullable: true),
            ]
        ),
    ]

    /// `$metadata`: V4 CSDL XML or V2 EDMX.
    public static func metadata(_ version: ODataVersion) -> String {
        var types = ""
        var container = ""
        for (set, type, properties) in sets {
            types += "<EntityType Name=\"\(type)\"><Key><PropertyRef Name=\"\(properties[0].name)\"/></Key>"
            for p in properties {
                types += "<Property Name=\"\(p.name)\" Type=\"\(p.type)\" Nullable=\"\(p.nullable)\"/>"
            }
            types += "</EntityType>"
            container += "<EntitySet Name=\"\(set)\" EntityType=\"\(namespace).\(type)\"/>"
        }
        switch version {
        case .v4:
            return """
                <?xml version="1.0" encoding="utf-8"?>
                <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">\
                <edmx:DataServices><Schema Namespace="\(namespace)" xmlns="http://docs.oasis-open.org/odata/ns/edm">\
                \(types)<EntityContainer Name="Container">\(container)</EntityContainer></Schema>\
                </edmx:DataServices></edmx:Edmx>
                """
        case .v2:
            return """
                <?xml version="1.0" encoding="utf-8"?>
                <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" \
                xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">\
                <edmx:DataServices m:DataServiceVersion="2.0"><Schema Namespace="\(namespace)" \
                xmlns="http://schemas.microsoft.com/ado/2008/09/edm">\(types)<EntityContainer Name="Container" \
                m:IsDefaultEntityContainer="true">\(container)</EntityContainer></Schema></edmx:DataServices></edmx:Edmx>
                """
        }
    }

    /// The columns of a set's rows in order: its properties, then `AffectedEntity`.
    static func columns(_ set: String) -> [String] {
        (sets.first { $0.set == set }?.properties.map(\.name) ?? []) + ["AffectedEntity"]
    }

    /// The parsed model of ``metadata(_:)``.
    static func model(_ version: ODataVersion) throws(ODataCore.ODataError) -> EdmModel {
        try CSDLParser.parse(metadata(version))
    }

    /// One row as an entity in the version's JSON: V4 minimal metadata, V2 verbose with `__metadata`;
    /// `AffectedEntity` as a navigation link to `entityRoot` + the entity's local URL.
    static func entity(
        set: String, row: [String: SQLValue], select: Set<String>?, version: ODataVersion,
        serviceRoot: String,
        entityRoot: String
    ) -> JSON {
        guard let info = sets.first(where: { $0.set == set }) else { return .null }
        var o = JSONObject()
        let keyValue = row[info.properties[0].name] ?? .null
        let keyLiteral: String
        if let n = keyValue.int64, info.properties[0].type == "Edm.Int64" {
            keyLiteral = version == .v2 ? "\(n)L" : "\(n)"
        } else {
            keyLiteral = "'" + (keyValue.string ?? "").replacingOccurrences(of: "'", with: "''") + "'"
        }
        if version == .v2 {
            o["__metadata"] = [
                "uri": .string(serviceRoot + set + "(" + keyLiteral + ")"),
                "type": .string(namespace + "." + info.type),
            ]
        }
        for p in info.properties where select?.contains(p.name) ?? true {
            let v = row[p.name] ?? .null
            switch (p.type, v) {
            case (_, .null): o[p.name] = .null
            case ("Edm.Boolean", _): o[p.name] = .bool((v.int ?? 0) != 0)
            case ("Edm.Int32", _): o[p.name] = .int(v.int64 ?? 0)
            case ("Edm.Int64", _):
                o[p.name] = version == .v2 ? .string(String(v.int64 ?? 0)) : .int(v.int64 ?? 0)
            default: o[p.name] = v.string.map(JSON.string) ?? .null
            }
        }
        if let affected = row["AffectedEntity"]?.string, select?.contains("AffectedEntity") ?? true {
            if version == .v2 {
                o["AffectedEntity"] = ["__deferred": ["uri": .string(entityRoot + affected)]]
            } else {
                o["AffectedEntity@odata.navigationLink"] = .string(entityRoot + affected)
            }
        }
        return .object(o)
    }
}
