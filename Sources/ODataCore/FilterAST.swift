/// Binary operators of `$filter`.
public enum ODataBinaryOperator: String, Sendable, Hashable, CaseIterable {
    case eq, ne, gt, ge, lt, le
    case and, or
    case add, sub, mul, div, divby, mod

    public var isComparison: Bool { [.eq, .ne, .gt, .ge, .lt, .le].contains(self) }
    public var isLogical: Bool { self == .and || self == .or }
    public var isArithmetic: Bool { !isComparison && !isLogical }

    /// The SQL operator with surrounding spaces (nil for `divby`, which needs a cast).
    public var sql: String? {
        switch self {
        case .eq: return " = "
        case .ne: return " <> "
        case .gt: return " > "
        case .ge: return " >= "
        case .lt: return " < "
        case .le: return " <= "
        case .and: return " AND "
        case .or: return " OR "
        case .add: return " + "
        case .sub: return " - "
        case .mul: return " * "
        case .div: return " / "
        case .mod: return " % "
        case .divby: return nil
        }
    }
}

/// Canonical functions of `$filter` and `$orderby`.
///
/// Promises: V2 `substringof(a, b)` is represented as `.contains` with arguments `[b, a]`, so both versions
/// produce the same tree.
public enum ODataFunction: String, Sendable, Hashable, CaseIterable {
    case contains, startswith, endswith, length, indexof, substring, tolower, toupper, trim, concat, replace
    case year, month, day, hour, minute, second, fractionalseconds, date, time, totaloffsetminutes
    case now, mindatetime, maxdatetime
    case round, floor, ceiling
    case isof, cast
}

/// A property path inside `$filter`, resolved against the model when one is known.
///
/// Promises: `steps` start at `root` (the current entity, `$it`, or a lambda range variable); `type` is the
/// type of the last step (nil only for untyped or open-type properties).
public struct ODataPropertyPath: Sendable, Hashable {
    /// Where the path starts: the current entity or a lambda range variable.
    public enum Root: Sendable, Hashable {
        case it
        case variable(String)
    }

    /// One resolved step: structural property (type nil when untyped), navigation, or type cast.
    public enum Step: Sendable, Hashable {
        case property(name: String, type: EdmTypeRef?)
        case navigation(name: String, entityType: String, isCollection: Bool)
        case cast(type: String)

        public var name: String {
            switch self {
            case .property(let name, _), .navigation(let name, _, _): return name
            case .cast(let type): return type
            }
        }
    }

    public var root: Root
    public var steps: [Step]
    public var type: EdmTypeRef?

    public init(root: Root = .it, steps: [Step], type: EdmTypeRef?) {
        self.root = root
        self.steps = steps
        self.type = type
    }

    /// The step names, e.g. `["Customer", "City"]`.
    public var names: [String] { steps.map(\.name) }
}

/// An `any`/`all` lambda over a collection path.
public struct ODataLambda: Sendable, Hashable {
    /// `any` or `all`.
    public enum Kind: String, Sendable, Hashable {
        case any
        case all
    }
    public var kind: Kind
    public var collection: ODataPropertyPath
    /// nil for `any()` without arguments.
    public var variable: String?
    public var predicate: ODataFilterExpression?
    /// The element type the range variable stands for (entity type name or primitive/complex type).
    public var elementType: EdmTypeRef?
}

/// A typed `$filter` / `$orderby` expression tree.
///
/// Promises: produced only by ``ODataFilterParser``; operands of `and`/`or`/`not` are boolean-valued,
/// comparisons have comparable operands, property paths exist in the model (when one was given); long
/// `and`/`or` chains are balanced, so the tree depth stays logarithmic in their length.
public indirect enum ODataFilterExpression: Sendable, Hashable {
    case literal(ODataLiteral)
    case property(ODataPropertyPath)
    case binary(ODataBinaryOperator, ODataFilterExpression, ODataFilterExpression)
    case not(ODataFilterExpression)
    case negate(ODataFilterExpression)
    case `in`(ODataFilterExpression, [ODataFilterExpression])
    case has(ODataFilterExpression, ODataLiteral)
    case function(ODataFunction, [ODataFilterExpression])
    /// A type name argument of `isof` / `cast`.
    case typeName(String)
    case lambda(ODataLambda)
    /// `Path/$count`: the number of members of a collection.
    case count(ODataPropertyPath)
}

/// One `$orderby` item.
public struct ODataOrderByItem: Sendable, Hashable {
    public var expression: ODataFilterExpression
    public var descending: Bool

    public init(expression: ODataFilterExpression, descending: Bool) {
        self.expression = expression
        self.descending = descending
    }
}

extension ODataFilterExpression {
    /// The EDM type of the expression's value as far as the tree tells: a property's declared type, a
    /// literal's own type, `Edm.Boolean` for predicates, the functions' result types; arithmetic takes the
    /// wider operand (`Edm.Double` over `Edm.Decimal` over `Edm.Int64` over `Edm.Int32`). Nil when unknown
    /// (untyped paths, `null`).
    public var staticType: EdmTypeRef? {
        func t(_ p: EdmPrimitiveType) -> EdmTypeRef { EdmTypeRef(name: p.rawValue) }
        switch self {
        case .literal(let l):
            if case .enumMember(let type, _) = l { return EdmTypeRef(name: type) }
            return l.edmType.map(t)
        case .property(let path): return path.type
        case .binary(let op, let l, let r):
            if !op.isArithmetic { return t(.boolean) }
            if op == .divby { return t(.double) }
            let types = [l.staticType, r.staticType].compactMap { $0?.primitive }
            if let temporal = types.first(where: \.isTemporal) {
                if op == .sub, types.count == 2, types[0] == types[1], temporal != .duration {
                    return t(.duration)
                }
                return t(temporal == .duration ? (types.first { $0 != .duration } ?? .duration) : temporal)
            }
            for wide in [EdmPrimitiveType.double, .single, .decimal, .int64] where types.contains(wide) {
                return t(wide == .single ? .double : wide)
            }
            return types.isEmpty ? nil : t(.int32)
        case .not, .in, .has, .lambda: return t(.boolean)
        case .negate(let inner): return inner.staticType
        case .count: return t(.int64)
        case .typeName: return nil
        case .function(let f, let args):
            switch f {
            case .contains, .startswith, .endswith, .isof: return t(.boolean)
            case .length, .indexof, .year, .month, .day, .hour, .minute, .second, .totaloffsetminutes:
                return t(.int32)
            case .substring, .tolower, .toupper, .trim, .concat, .replace: return t(.string)
            case .fractionalseconds: return t(.decimal)
            case .date: return t(.date)
            case .time: return t(.timeOfDay)
            case .now, .mindatetime, .maxdatetime: return t(.dateTimeOffset)
            case .round, .floor, .ceiling: return args.first?.staticType
            case .cast:
                if case .typeName(let name)? = args.last { return EdmTypeRef(name: name) }
                return nil
            }
        }
    }
}
