// Functions, property paths and lambdas of ``FilterParserState`` (the operators are in FilterParser.swift).

extension FilterParserState {
    // MARK: Functions

    mutating func parseFunction(_ function: ODataFunction, name: String, at start: Int) throws(ODataError)
        -> Typed
    {
        try expect(.open, "'('")
        try enter()
        defer { leave() }
        var args: [Typed] = []
        var argOffsets: [Int] = []
        if current.kind != .close {
            while true {
                argOffsets.append(offset)
                if function == .isof || function == .cast, let typeName = typeNameArgument() {
                    args.append((.typeName(typeName), .unknown))
                } else {
                    args.append(try parseExpression())
                }
                if current.kind == .comma {
                    advance()
                    continue
                }
                break
            }
        }
        try expect(.close, "',' or ')'")
        let lower = name.lowercased()
        if lower == "substringof" {
            guard args.count == 2 else { throw error("'substringof' takes 2 arguments", at: start) }
            args.swapAt(0, 1)
            argOffsets.swapAt(0, 1)
        }
        func arity(_ range: ClosedRange<Int>) throws(ODataError) {
            guard range.contains(args.count) else {
                let expected =
                    range.lowerBound == range.upperBound
                    ? "\(range.lowerBound)" : "\(range.lowerBound) or \(range.upperBound)"
                throw error(
                    "'\(name)' takes \(expected) argument\(range.upperBound == 1 ? "" : "s")", at: start)
            }
        }
        func require(_ index: Int, _ ok: (ValueKind) -> Bool, _ what: String) throws(ODataError) {
            let kind = args[index].1
            if kind == .unknown || kind == .null || ok(kind) { return }
            throw error(
                "argument \(index + 1) of '\(name)' must be \(what), not \(kind.name)", at: argOffsets[index])
        }
        let isString: (ValueKind) -> Bool = { $0 == .string }
        let isNumber: (ValueKind) -> Bool = { $0 == .numeric }
        let isTemporal: (ValueKind) -> Bool = {
            if case .temporal = $0 { return true }
            return false
        }
        let result: ValueKind
        switch function {
        case .contains, .startswith, .endswith:
            try arity(2...2)
            try require(0, isString, "a string")
            try require(1, isString, "a string")
            result = .boolean
        case .length:
            try arity(1...1)
            try require(0, isString, "a string")
            result = .numeric
        case .indexof:
            try arity(2...2)
            try require(0, isString, "a string")
            try require(1, isString, "a string")
            result = .numeric
        case .substring:
            try arity(2...3)
            try require(0, isString, "a string")
            for i in 1..<args.count { try require(i, isNumber, "a number") }
            result = .string
        case .tolower, .toupper, .trim:
            try arity(1...1)
            try require(0, isString, "a string")
            result = .string
        case .concat:
            try arity(2...2)
            try require(0, isString, "a string")
            try require(1, isString, "a string")
            result = .string
        case .replace:
            try arity(3...3)
            for i in 0..<3 { try require(i, isString, "a string") }
            result = .string
        case .year, .month, .day, .hour, .minute, .second, .fractionalseconds, .totaloffsetminutes:
            try arity(1...1)
            try require(0, isTemporal, "a date or time")
            result = .numeric
        case .date:
            try arity(1...1)
            try require(0, { $0.isDateLike }, "a date-time")
            result = .temporal(.date)
        case .time:
            try arity(1...1)
            try require(0, { $0.isDateLike }, "a date-time")
            result = .temporal(.timeOfDay)
        case .now, .mindatetime, .maxdatetime:
            try arity(0...0)
            result = .temporal(.dateTimeOffset)
        case .round, .floor, .ceiling:
            try arity(1...1)
            try require(0, isNumber, "a number")
            result = .numeric
        case .isof, .cast:
            try arity(1...2)
            guard case .typeName(let typeName)? = args.last?.0 else {
                throw error(
                    "the last argument of '\(name)' must be a type name", at: argOffsets.last ?? start)
            }
            if function == .isof {
                result = .boolean
            } else {
                result = ValueKind.of(EdmTypeRef(name: typeName), model: config.model)
            }
        }
        return (.function(function, args.map(\.0)), result)
    }

    /// A qualified type name (`Edm.String`, `NS.Type`) or a quoted one (V2 `isof('NS.Type')`) as the next
    /// argument, when the argument is just that.
    mutating func typeNameArgument() -> String? {
        let next = peek().kind
        guard next == .comma || next == .close else { return nil }
        switch current.kind {
        case .identifier(let name) where name.contains("."):
            advance()
            return config.model?.resolveQualifiedName(name) ?? name
        case .literal(.string(let name)) where name.contains("."):
            advance()
            return config.model?.resolveQualifiedName(name) ?? name
        default:
            return nil
        }
    }

    // MARK: Paths and lambdas

    mutating func parsePath() throws(ODataError) -> Typed {
        let start = offset
        guard case .identifier(let first) = current.kind else { throw error("expected a property") }
        var path: ODataPropertyPath
        var currentType: EdmTypeRef?
        if first == "$it" || first == "$this" {
            path = ODataPropertyPath(root: .it, steps: [], type: nil)
            currentType = config.entityType.map { EdmTypeRef(name: $0) }
            if first == "$this", let scope = scopes.last {
                path.root = .variable(scope.name)
                currentType = scope.type
            }
            advance()
            if current.kind != .slash {
                path.type = currentType
                return (.property(path), ValueKind.of(currentType, model: config.model))
            }
            advance()
        } else if let scope = scopes.last(where: { $0.name == first }) {
            path = ODataPropertyPath(root: .variable(first), steps: [], type: nil)
            currentType = scope.type
            advance()
            if current.kind != .slash {
                path.type = currentType
                return (.property(path), ValueKind.of(currentType, model: config.model))
            }
            advance()
        } else {
            path = ODataPropertyPath(root: .it, steps: [], type: nil)
            currentType = config.entityType.map { EdmTypeRef(name: $0) }
            if let computedType = config.computed[first],
                currentType.flatMap({ config.model?.property(named: first, in: $0.name) }) == nil
            {
                advance()
                guard current.kind != .slash else {
                    throw error("the computed property '\(first)' has no members")
                }
                let path = ODataPropertyPath(
                    root: .it, steps: [.property(name: first, type: computedType)], type: computedType)
                return (.property(path), ValueKind.of(computedType, model: config.model))
            }
            // 4.01 bare duration, when no property has that name.
            if LiteralScanner.isDuration(first), peek().kind != .slash,
                currentType.flatMap({ config.model?.property(named: first, in: $0.name) }) == nil
            {
                advance()
                return (.literal(.duration(first)), .temporal(.duration))
            }
        }
        var untyped = config.model == nil || currentType == nil
        while true {
            guard case .identifier(let name) = current.kind else {
                throw error("expected a property name after '/'")
            }
            let nameOffset = offset
            if (name == "any" || name == "all") && peek().kind == .open {
                guard !path.steps.isEmpty || path.root != .it else {
                    throw error("'\(name)' must follow a collection path", at: nameOffset)
                }
                advance()
                return try parseLambda(
                    name == "any" ? .any : .all, path: path, collectionType: currentType, untyped: untyped)
            }
            advance()
            if untyped {
                path.steps.append(.property(name: name, type: nil))
                currentType = nil
            } else {
                let resolved = try resolveStep(name, in: currentType!, at: nameOffset)
                path.steps.append(resolved.step)
                currentType = resolved.type
                untyped = currentType == nil
            }
            if current.kind == .slash {
                if let ct = currentType, ct.isCollection, !untyped, !followsCollection(peek()) {
                    throw error("'\(name)' is a collection; use any(), all() or $count", at: nameOffset)
                }
                advance()
                if case .identifier("$count") = current.kind {
                    advance()
                    path.type = currentType
                    return (.count(path), .numeric)
                }
                continue
            }
            break
        }
        path.type = currentType
        if path.steps.isEmpty { throw error("expected a property", at: start) }
        return (.property(path), ValueKind.of(currentType, model: config.model))
    }

    /// Only a lambda, `$count` or a cast may follow a collection.
    func followsCollection(_ token: Token) -> Bool {
        guard case .identifier(let next) = token.kind else { return false }
        return next == "any" || next == "all" || next == "$count" || next.contains(".")
    }

    func resolveStep(_ name: String, in type: EdmTypeRef, at offset: Int) throws(ODataError)
        -> (step: ODataPropertyPath.Step, type: EdmTypeRef?)
    {
        guard let model = config.model else { return (.property(name: name, type: nil), nil) }
        let typeName = type.name
        if let property = model.property(named: name, in: typeName) {
            return (.property(name: name, type: property.type), property.type)
        }
        if let nav = model.navigationProperty(named: name, in: typeName) {
            return (
                .navigation(name: name, entityType: nav.target, isCollection: nav.isCollection),
                EdmTypeRef(name: nav.target, isCollection: nav.isCollection)
            )
        }
        if name.contains("."), let derived = model.structuredType(name),
            model.isType(derived.qualifiedName, derivedFrom: typeName)
        {
            return (
                .cast(type: derived.qualifiedName),
                EdmTypeRef(name: derived.qualifiedName, isCollection: type.isCollection)
            )
        }
        if model.structuredType(typeName)?.isOpen == true
            || model.typeHierarchy(of: typeName).contains(where: \.isOpen)
        {
            return (.property(name: name, type: nil), nil)
        }
        if model.structuredType(typeName) == nil {
            throw error("'\(name)' cannot be applied to a value of type \(typeName)", at: offset)
        }
        throw error("'\(name)' is not a property of '\(typeName)'", at: offset)
    }

    mutating func parseLambda(
        _ kind: ODataLambda.Kind, path: ODataPropertyPath, collectionType: EdmTypeRef?, untyped: Bool
    ) throws(ODataError) -> Typed {
        let lambdaOffset = offset
        if let collectionType, !collectionType.isCollection {
            throw error(
                "'\(kind.rawValue)' needs a collection, but '\(path.names.joined(separator: "/"))' is single-valued",
                at: lambdaOffset)
        }
        var collection = path
        collection.type = collectionType
        let elementType = collectionType.map { EdmTypeRef(name: $0.name) }
        try expect(.open, "'('")
        try enter()
        defer { leave() }
        if current.kind == .close {
            guard kind == .any else { throw error("'all' needs a predicate") }
            advance()
            return (
                .lambda(
                    ODataLambda(
                        kind: kind, collection: collection, variable: nil, predicate: nil,
                        elementType: elementType)), .boolean
            )
        }
        guard case .identifier(let variable) = current.kind, !variable.hasPrefix("$") else {
            throw error("expected a range variable name")
        }
        advance()
        try expect(.colon, "':' after the range variable")
        if scopes.contains(where: { $0.name == variable }) {
            throw error("the range variable '\(variable)' is already in use")
        }
        scopes.append(FilterScope(name: variable, type: untyped ? nil : elementType))
        defer { scopes.removeLast() }
        let predicateOffset = offset
        let predicate = try parseExpression()
        guard predicate.1.isBooleanish else {
            throw error("the predicate of '\(kind.rawValue)' must be boolean", at: predicateOffset)
        }
        try expect(.close, "')'")
        return (
            .lambda(
                ODataLambda(
                    kind: kind, collection: collection, variable: variable, predicate: predicate.0,
                    elementType: elementType)),
            .boolean
        )
    }
}
