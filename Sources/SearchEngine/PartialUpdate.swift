import JSONCore

/// Algolia's partial update of one record (`partialUpdateObject`): first-level attributes of the body
/// replace the record's, and an attribute given as `{"_operation": OP, "value": V}` applies a built-in
/// operation: `Increment`, `Decrement` (numbers), `Add`, `AddUnique`, `Remove` (array elements),
/// `IncrementFrom` (adds 1 when the value equals V, else the whole update is ignored) and
/// `IncrementSet` (sets V when it is larger than the value, else the whole update is ignored); a
/// missing attribute counts as 0 or as an empty array.
public enum PartialUpdate {
    /// What applying the body gives.
    public enum Outcome: Sendable, Equatable {
        /// The record after the update.
        case updated(JSON)
        /// The update does not apply (an `IncrementFrom`/`IncrementSet` condition failed): the record is
        /// unchanged or, when there was none, not created.
        case ignored
    }

    /// The operation names, as Algolia spells them.
    public static let operations: Set<String> = [
        "Increment", "Decrement", "Add", "AddUnique", "Remove", "IncrementFrom", "IncrementSet",
    ]

    /// Whether applying `body` twice may differ from applying it once (it uses `Increment`,
    /// `Decrement`, `Add` or `Remove`; `IncrementFrom`, `IncrementSet` and `AddUnique` are idempotent).
    public static func isIdempotent(_ body: JSONObject) -> Bool {
        for (_, value) in body {
            if let op = value["_operation"]?.stringValue,
                ["Increment", "Decrement", "Add", "Remove"].contains(op)
            {
                return false
            }
        }
        return true
    }

    /// Applies `body` to `existing` (nil: the record does not exist and is created from the body).
    /// Throws ``SearchError`` (400) for an unknown operation or an operand of the wrong type.
    public static func apply(_ body: JSONObject, to existing: JSON?, objectID: String) throws(SearchError)
        -> Outcome
    {
        var record = existing?.objectValue ?? ["objectID": .string(objectID)]
        for (key, value) in body where key != "objectID" {
            guard case .object(let spec) = value, let op = spec["_operation"] else {
                record[key] = value
                continue
            }
            guard let name = op.stringValue, operations.contains(name) else {
                throw SearchError(
                    status: 400,
                    message:
                        "\(key): unknown _operation \(op.serialized()) (expected one of \(operations.sorted().joined(separator: ", ")))"
                )
            }
            let operand = spec["value"] ?? .null
            let current = record[key]
            switch name {
            case "Increment", "Decrement":
                guard operand.doubleValue != nil else {
                    throw SearchError(status: 400, message: "\(key): \(name) needs a numeric value")
                }
                let base = current ?? .int(0)
                guard base.doubleValue != nil else {
                    throw SearchError(status: 400, message: "\(key): \(name) applies to a numeric attribute")
                }
                record[key] = add(base, operand, negate: name == "Decrement")
            case "Add", "AddUnique", "Remove":
                guard operand.stringValue != nil || operand.doubleValue != nil else {
                    throw SearchError(status: 400, message: "\(key): \(name) needs a string or numeric value")
                }
                var items: [JSON]
                switch current {
                case nil: items = []
                case .array(let a)?: items = a
                case let scalar?: items = [scalar]
                }
                switch name {
                case "Add": items.append(operand)
                case "AddUnique": if !items.contains(where: { same($0, operand) }) { items.append(operand) }
                default:
                    if current == nil { continue }
                    items.removeAll { same($0, operand) }
                }
                record[key] = .array(items)
            default:  // IncrementFrom, IncrementSet
                guard let wanted = operand.intValue else {
                    throw SearchError(status: 400, message: "\(key): \(name) needs an integer value")
                }
                let value: Int
                switch current {
                case nil: value = 0
                case let c?:
                    guard let v = c.intValue else {
                        throw SearchError(
                            status: 400, message: "\(key): \(name) applies to an integer attribute")
                    }
                    value = v
                }
                if name == "IncrementFrom" {
                    guard value == wanted else { return .ignored }
                    record[key] = .int(Int64(value) + 1)
                } else {
                    guard wanted > value else { return .ignored }
                    record[key] = .int(Int64(wanted))
                }
            }
        }
        record["objectID"] = .string(objectID)
        return .updated(.object(record))
    }

    private static func add(_ a: JSON, _ b: JSON, negate: Bool) -> JSON {
        if case .int(let x) = a, case .int(let y) = b {
            let (sum, overflow) = negate ? x.subtractingReportingOverflow(y) : x.addingReportingOverflow(y)
            if !overflow { return .int(sum) }
        }
        let x = a.doubleValue ?? 0
        let y = b.doubleValue ?? 0
        return .double(negate ? x - y : x + y)
    }

    private static func same(_ a: JSON, _ b: JSON) -> Bool {
        if let x = a.doubleValue, let y = b.doubleValue { return x == y }
        return a == b
    }
}
