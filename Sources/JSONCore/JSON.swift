/// An immutable JSON value.
///
/// Promises:
/// - integers that fit in `Int64` are kept exact (`.int`); every other number is a `.double`;
/// - objects keep their keys in document order (``JSONObject``), so a value parsed and serialized again
///   comes back with the same key order;
/// - values are `Sendable` and `Hashable`. Object equality ignores key order; `.int(1)` and `.double(1)`
///   are different values (use ``doubleValue`` to compare numerically).
public enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)
}

extension JSON {
    /// The value for `key` when this is an object, `nil` otherwise or when the key is absent.
    public subscript(key: String) -> JSON? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The element at `index` when this is an array and the index is in range.
    public subscript(index: Int) -> JSON? {
        if case .array(let array) = self, array.indices.contains(index) { return array[index] }
        return nil
    }

    /// The string when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer when this is an integer or a double with an exact integral value.
    public var intValue: Int? {
        switch self {
        case .int(let value): return Int(exactly: value)
        case .double(let value): return Int(exactly: value)
        default: return nil
        }
    }

    /// The number as a `Double` when this is a number.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The boolean when this is a boolean.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The elements when this is an array.
    public var arrayValue: [JSON]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The object when this is an object.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// True for `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// True for `.int` and `.double`.
    public var isNumber: Bool {
        switch self {
        case .int, .double: return true
        default: return false
        }
    }
}

extension JSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        var object = JSONObject()
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

extension JSON: CustomStringConvertible {
    /// The compact serialization.
    public var description: String { serialized() }
}

/// A JSON object that keeps its keys in insertion (document) order and looks keys up quickly.
///
/// Promises: iteration yields `(key, value)` pairs in insertion order; assigning to an existing key
/// replaces the value in place (position kept); assigning `nil` removes the key. Lookup is a linear scan
/// for small objects and a hash lookup once the object has more than 8 keys. Equality ignores order.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var keys: [String]
    public private(set) var values: [JSON]
    private var lookup: [String: Int]?

    private static let hashThreshold = 16

    public init() {
        keys = []
        values = []
        lookup = nil
    }

    public init(dictionaryLiteral elements: (String, JSON)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }

    /// Builds an object from pairs; a later duplicate key replaces the earlier value in place.
    public init(_ pairs: some Sequence<(String, JSON)>) {
        self.init()
        for (key, value) in pairs { self[key] = value }
    }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    /// The position of `key`, if present.
    public func index(of key: String) -> Int? {
        if let lookup { return lookup[key] }
        for i in keys.indices where keys[i] == key { return i }
        return nil
    }

    public subscript(key: String) -> JSON? {
        get {
            guard let i = index(of: key) else { return nil }
            return values[i]
        }
        set {
            if let i = index(of: key) {
                if let newValue {
                    values[i] = newValue
                } else {
                    keys.remove(at: i)
                    values.remove(at: i)
                    rebuildLookup()
                }
            } else if let newValue {
                keys.append(key)
                values.append(newValue)
                if lookup != nil {
                    lookup![key] = keys.count - 1
                } else if keys.count > Self.hashThreshold {
                    rebuildLookup()
                }
            }
        }
    }

    /// Appends without checking for duplicates; the caller guarantees `key` is new. Used by the parser.
    mutating func appendUnchecked(_ key: String, _ value: JSON) {
        keys.append(key)
        values.append(value)
        if lookup != nil {
            lookup![key] = keys.count - 1
        } else if keys.count > Self.hashThreshold {
            rebuildLookup()
        }
    }

    private mutating func rebuildLookup() {
        guard keys.count > Self.hashThreshold else {
            lookup = nil
            return
        }
        var map = [String: Int](minimumCapacity: keys.count)
        for (i, key) in keys.enumerated() { map[key] = i }
        lookup = map
    }

    public func makeIterator() -> some IteratorProtocol<(key: String, value: JSON)> {
        var i = 0
        let keys = self.keys
        let values = self.values
        return AnyIterator {
            guard i < keys.count else { return nil }
            defer { i += 1 }
            return (key: keys[i], value: values[i])
        }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for i in lhs.keys.indices {
            guard let other = rhs[lhs.keys[i]], other == lhs.values[i] else { return false }
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        // Order-independent: combine per-pair hashes commutatively.
        var combined = 0
        for i in keys.indices {
            var pairHasher = Hasher()
            pairHasher.combine(keys[i])
            pairHasher.combine(values[i])
            combined ^= pairHasher.finalize()
        }
        hasher.combine(count)
        hasher.combine(combined)
    }
}
