import JSONCore
import Storage

@testable import ODataCore

/// A wire value of the test data (JSON as a service sends it, numbers as written).
indirect enum Wire {
    case s(String)
    case n(String)
    case b(Bool)
    case null
    case o([(String, Wire)])
    case a([Wire])

    var json: String {
        switch self {
        case .s(let s):
            return "\""
                + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                + "\""
        case .n(let n): return n
        case .b(let b): return b ? "true" : "false"
        case .null: return "null"
        case .o(let members):
            return "{" + members.map { Wire.s($0.0).json + ":" + $0.1.json }.joined(separator: ",") + "}"
        case .a(let items): return "[" + items.map(\.json).joined(separator: ",") + "]"
        }
    }

    func member(_ path: [String]) -> Wire {
        var current = self
        for name in path {
            guard case .o(let members) = current, let next = members.first(where: { $0.0 == name })?.1 else {
                return .null
            }
            current = next
        }
        return current
    }

    var scalar: RawJSON {
        switch self {
        case .s(let s): return .string(s)
        case .n(let n): return .number(n)
        case .b(let b): return .bool(b)
        default: return .null
        }
    }
}

/// The Shop model's entity sets in an in-memory SQLite database laid out like ``ModelSQLMapping`` with a
/// `_type` and a `_json` column, values stored by ``ODataStorage`` (or as the V1 mirror does).
final class ShopDatabase {
    let model: EdmModel
    let db: Database
    let profile: SQLStorageProfile
    let mapping: ModelSQLMapping

    init(
        model: EdmModel = ShopFixture.model, profile: SQLStorageProfile = .exact,
        derivedTypeColumns: Bool = true
    ) throws {
        self.model = model
        self.profile = profile
        db = try Database(path: ":memory:")
        mapping = ModelSQLMapping(
            model: model, profile: profile, typeColumn: "_type", documentColumn: "_json",
            derivedTypeColumns: derivedTypeColumns)
        for set in model.entitySets where !set.isSingleton {
            let columns = Self.columns(of: set.entityType, in: model, mapping: mapping)
            var defs = [#""_json" TEXT NOT NULL"#, #""_type" TEXT"#]
            for (name, path) in columns {
                let type = try require2(
                    model.typeAndDerived(set.entityType).lazy.compactMap {
                        self.model.property(path: path, in: $0)
                    }
                    .first?.type)
                let affinity: String
                if model.enumType(type) != nil {
                    affinity = profile == .exact ? "INTEGER" : "TEXT"
                } else if profile == .mirrorV1, model.primitiveType(of: type) == .decimal {
                    affinity = "REAL"
                } else {
                    affinity = ODataStorage.columnType(model.primitiveType(of: type)!) ?? "TEXT"
                }
                defs.append(ODataSQLTranslator.quote(name) + " " + affinity)
            }
            try db.execute(
                "CREATE TABLE \(ODataSQLTranslator.quote(set.name)) (\(defs.joined(separator: ", ")))")
        }
    }

    /// Column names and property paths, as ``ModelSQLMapping/column(for:in:)`` names them.
    static func columns(of type: String, in model: EdmModel, mapping: ModelSQLMapping) -> [(String, [String])]
    {
        func paths(_ t: String, _ prefix: [String]) -> [[String]] {
            guard prefix.count < 5 else { return [] }
            var out: [[String]] = []
            for p in model.properties(of: t) where !p.type.isCollection {
                let path = prefix + [p.name]
                if let complex = model.structuredType(p.type.name), !complex.isEntity {
                    out += paths(complex.qualifiedName, path)
                } else {
                    out.append(path)
                }
            }
            return out
        }
        var out: [(String, [String])] = []
        for t in [type] + model.derivedTypes(of: type).map(\.qualifiedName) {
            for path in paths(t, []) where !out.contains(where: { $0.1 == path }) {
                if let column = mapping.column(for: path, in: t) { out.append((column, path)) }
            }
        }
        return out
    }

    func insert(_ set: String, type: String? = nil, _ entity: Wire) throws {
        let entitySet = model.entitySet(named: set)!
        let columns = Self.columns(of: entitySet.entityType, in: model, mapping: mapping)
        var names = [#""_json""#, #""_type""#]
        var values: [SQLValue] = [.text(entity.json), type.map { .text($0) } ?? .null]
        for (name, path) in columns {
            let declared = model.typeAndDerived(entitySet.entityType).lazy.compactMap {
                self.model.property(path: path, in: $0)
            }.first!.type
            let wire = entity.member(path).scalar
            names.append(ODataSQLTranslator.quote(name))
            values.append(Self.stored(wire, declared, model: model, profile: profile))
        }
        try db.run(
            "INSERT INTO \(ODataSQLTranslator.quote(set)) (\(names.joined(separator: ", "))) VALUES ("
                + Array(repeating: "?", count: names.count).joined(separator: ", ") + ")", values)
    }

    static func stored(_ wire: RawJSON, _ type: EdmTypeRef, model: EdmModel, profile: SQLStorageProfile)
        -> SQLValue
    {
        let binding: SQLBinding
        if let e = model.enumType(type) {
            if profile == .exact {
                binding = ODataStorage.encode(wire, as: e)
            } else if case .string(let s) = wire {
                binding = .text(s)
            } else {
                binding = .null
            }
        } else if profile == .mirrorV1 {
            // How Mirror.columnValue stores values today.
            switch (wire, model.primitiveType(of: type)!) {
            case (.null, _): binding = .null
            case (.number(let n), .decimal), (.string(let n), .decimal):
                binding = Double(n).map(SQLBinding.real) ?? .text(n)
            case (.string(let s), .dateTimeOffset):
                binding = .text(SQLDefaults.normalizeDateTimeOffset(s) ?? s)
            case (.string(let s), .duration), (.string(let s), .timeOfDay): binding = .text(s)
            default: binding = ODataStorage.encode(wire, as: model.primitiveType(of: type)!)
            }
        } else {
            binding = ODataStorage.encode(wire, as: model.primitiveType(of: type)!)
        }
        return sqlValue(binding)
    }

    /// Test-side conversions between the translator's bindings and Storage's values.
    static func binding(_ v: SQLValue) -> SQLBinding {
        switch v {
        case .null: return .null
        case .integer(let i): return .integer(i)
        case .real(let d): return .real(d)
        case .text(let t): return .text(t)
        case .blob(let b): return .blob(b)
        }
    }

    static func sqlValue(_ b: SQLBinding) -> SQLValue {
        switch b {
        case .null: return .null
        case .integer(let i): return .integer(i)
        case .real(let d): return .real(d)
        case .text(let t): return .text(t)
        case .blob(let b): return .blob(b)
        }
    }

    func translator(_ type: String) -> ODataSQLTranslator {
        ODataSQLTranslator(mapping: mapping, model: model, rootEntityType: type)
    }

    /// The IDs of `set`'s rows matching `filter`, in `orderBy` order (then by ID).
    func ids(_ set: String, _ filter: String? = nil, orderBy: String? = nil) throws -> [Int64] {
        let type = model.entitySet(named: set)!.entityType
        let parser = ODataFilterParser(model: model, entityType: type)
        let translator = translator(type)
        var sql = "SELECT \"t0\".\"ID\" FROM \(ODataSQLTranslator.quote(set)) AS \"t0\""
        var bindings: [SQLBinding] = []
        if let filter {
            let f = try translator.translateFilter(try parser.parseFilter(filter))
            sql += " WHERE " + f.sql
            bindings += f.bindings
        }
        sql += " ORDER BY "
        if let orderBy {
            let o = try translator.translateOrderBy(try parser.parseOrderBy(orderBy))
            sql += o.sql + ", "
            bindings += o.bindings
        }
        sql += "\"t0\".\"ID\""
        return try db.query(sql, bindings.map(Self.sqlValue)).map { $0.values[0].int64 ?? -1 }
    }
}

extension EdmModel {
    func property(path: [String], in type: String) -> EdmProperty? {
        var current = type
        var found: EdmProperty?
        for name in path {
            guard let p = property(named: name, in: current) else { return nil }
            found = p
            current = p.type.name
        }
        return found
    }
}

struct MissingValue: Error {}

func require2<T>(_ value: T?) throws -> T {
    guard let value else { throw MissingValue() }
    return value
}

/// Test data: products whose values sit where text or float comparison would go wrong.
enum ShopData {
    static func product(
        _ id: Int, price: String? = nil, priceAsString: Bool = false, shelfLife: String? = nil,
        created: String? = nil, from: String? = nil, released: String? = nil, stock: Wire = .null,
        code: String? = nil, thumb: String? = nil, tags: [String] = [], colors: String? = nil,
        status: String? = nil, rating: String? = nil, name: String = "P"
    ) -> Wire {
        func text(_ v: String?) -> Wire { v.map(Wire.s) ?? .null }
        var members: [(String, Wire)] = [("ID", .n(String(id))), ("Name", .s(name))]
        let priceValue: Wire = price.map { priceAsString ? .s($0) : .n($0) } ?? .null
        members.append(("Price", priceValue))
        members.append(("ShelfLife", text(shelfLife)))
        members.append(("Created", text(created)))
        members.append(("AvailableFrom", text(from)))
        members.append(("ReleaseDate", text(released)))
        members.append(("Stock", stock))
        members.append(("Code", text(code)))
        members.append(("Thumbnail", text(thumb)))
        members.append(("Tags", .a(tags.map(Wire.s))))
        members.append(("Colors", text(colors)))
        members.append(("Status", text(status)))
        members.append(("Rating", rating.map(Wire.n) ?? .null))
        return .o(members)
    }

    static let products: [Wire] = [
        product(
            1, price: "12345678901234567890.12", shelfLife: "P10D", created: "2020-01-01T10:00:00+02:00",
            from: "08:00", released: "2020-01-01", stock: .s("9007199254740993"),
            code: "6F9619FF-8B86-D011-B42D-00C04FC964FF", thumb: "AQID", tags: ["red", "sale"],
            colors: "Red,Blue",
            status: "Open", rating: "4.5", name: "Widget"),
        product(
            2, price: "12345678901234567890.13", priceAsString: true, shelfLife: "PT240H",
            created: "2020-01-01T09:00:00Z", from: "08:00:00.5", released: "2020-02-29",
            stock: .n("9007199254740992"), code: "00000000-0000-0000-0000-000000000001", thumb: "AQIE",
            tags: ["blue"], colors: "Green", status: "Shipped", rating: "3", name: "Gadget widget"),
        product(
            3, price: "1.50", shelfLife: "P9DT23H", created: "2020-01-01T08:00:00.5Z",
            from: "23:59:59.9999999",
            released: "2019-12-31", stock: .n("-1"), tags: [], colors: "Red", status: "Closed", rating: "1e1",
            name: "Thing"),
        product(
            4, price: "1.5", shelfLife: "P21D", created: "2020-01-01T08:00:00Z", from: "00:00",
            tags: ["sale", "x"], colors: "Blue, Green, Red", status: "Open", name: "Other \"WIDGET\""),
        product(5, price: "-0.5", shelfLife: "PT36H", created: "2019-12-31T23:59:59.999-00:30", name: "Café"),
        product(6, price: "0", shelfLife: "-P1D", name: "nothing"),
        product(7, price: "1e2"),
    ]

    static let people: [(String?, Wire)] = [
        (
            nil,
            .o([
                ("ID", .n("1")), ("Name", .s("Ann")), ("Address", .o([("City", .s("Berlin"))])),
                ("Emails", .a([.s("ann@x.org")])),
                ("Addresses", .a([.o([("City", .s("Paris")), ("Street", .s("Rue 1"))])])),
            ])
        ),
        (
            "Shop.Model.Employee",
            .o([
                ("ID", .n("2")), ("Name", .s("Bob")), ("Salary", .s("100000.005")),
                ("HiredOn", .s("2019-05-01")), ("DepartmentID", .n("1")),
                ("Address", .o([("City", .s("Rome"))])),
                ("Emails", .a([.s("bob@x.org"), .s("b@y.org")])), ("Addresses", .a([])),
            ])
        ),
        (
            "Shop.Model.Employee",
            .o([
                ("ID", .n("3")), ("Name", .s("Cid")), ("Salary", .n("99999.9")),
                ("DepartmentID", .n("1")), ("Emails", .a([])),
            ])
        ),
        (
            "Shop.Model.Customer",
            .o([
                ("ID", .n("4")), ("Name", .s("Dee")), ("Tier", .n("2")),
                ("Addresses", .a([.o([("City", .s("Rome"))]), .o([("City", .s("Oslo"))])])),
            ])
        ),
    ]

    static func load(into shop: ShopDatabase) throws {
        for p in products { try shop.insert("Products", p) }
        for (type, p) in people { try shop.insert("People", type: type, p) }
        try shop.insert(
            "Departments", .o([("ID", .n("1")), ("Name", .s("R&D")), ("Budget", .s("5000000.00"))]))
        try shop.insert("Departments", .o([("ID", .n("2")), ("Name", .s("Ops")), ("Budget", .n("12.5"))]))
        try shop.insert("Orders", .o([("ID", .n("1")), ("CustomerID", .n("4")), ("Status", .s("Open"))]))
    }
}
