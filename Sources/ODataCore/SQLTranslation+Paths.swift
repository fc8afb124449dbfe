// Path, lambda, `$count` and function-call translation of ``SQLTranslationContext`` (the rest of the
// translation is in SQLTranslation.swift).

extension SQLTranslationContext {
    /// `EXISTS` over a path ending in a single-valued navigation.
    mutating func navigationExists(_ path: ODataPropertyPath) throws(ODataError) -> SQLFragment {
        let binding = try start(path.root)
        return try existsChain(
            path.steps[...], alias: binding.alias, entityType: binding.entityType,
            body: { _, _, _ in SQLFragment("") })
    }

    /// Nested `EXISTS (SELECT 1 FROM … WHERE join AND …)` through navigation steps (casts become type
    /// conditions); `body` adds the condition on the innermost row.
    mutating func existsChain(
        _ steps: ArraySlice<ODataPropertyPath.Step>, alias: String, entityType: String?,
        body: (inout SQLTranslationContext, String, String) throws(ODataError) -> SQLFragment
    ) throws(ODataError) -> SQLFragment {
        guard let entityType else { throw fail("unsupported collection path") }
        var rest = steps
        var castType: String?
        while case .cast(let t)? = rest.first {
            castType = t
            rest = rest.dropFirst()
        }
        let outerCondition = try castType.flatMap { t throws(ODataError) in
            try typeCondition(alias: alias, entityType: entityType, castType: t)
        }
        guard let first = rest.first else {
            // Only a cast remained: the condition is on the current row.
            return (outerCondition.map { " AND " + $0 } ?? SQLFragment(""))
                + (try body(&self, alias, castType ?? entityType))
        }
        guard case .navigation(let name, let target, _) = first else {
            throw fail("'\(first.name)' is not a navigation property")
        }
        guard let nav = mapping.navigation(name, from: castType ?? entityType) else {
            throw fail("the navigation '\(name)' is not available locally")
        }
        let inner = newAlias()
        let condition: SQLFragment
        if rest.count == 1 {
            condition = try body(&self, inner, target)
        } else if rest.dropFirst().allSatisfy({ if case .cast = $0 { true } else { false } }) {
            condition = try existsChain(rest.dropFirst(), alias: inner, entityType: target, body: body)
        } else {
            condition =
                " AND " + (try existsChain(rest.dropFirst(), alias: inner, entityType: target, body: body))
        }
        let exists =
            "EXISTS (SELECT 1 FROM " + fromClause(nav, alias: inner) + " WHERE "
            + joinCondition(nav, outer: alias, inner: inner) + condition + ")"
        if let outerCondition { return "(" + outerCondition + " AND " + exists + ")" }
        return exists
    }

    mutating func lambda(_ lambda: ODataLambda) throws(ODataError) -> SQLFragment {
        let binding = try start(lambda.collection.root)
        let steps = lambda.collection.steps
        let isAll = lambda.kind == .all
        let predicate = lambda.predicate
        let variable = lambda.variable
        func condition(_ context: inout SQLTranslationContext, _ bound: Binding) throws(ODataError)
            -> SQLFragment
        {
            guard let predicate, let variable else { return SQLFragment("") }
            let saved = context.variables[variable]
            context.variables[variable] = bound
            defer { context.variables[variable] = saved }
            let p = try context.predicate(predicate)
            return isAll ? " AND (" + p + ") IS NOT 1" : " AND " + p
        }
        // A collection of primitive or complex values.
        if case .property? = steps.last(where: { if case .cast = $0 { false } else { true } }) {
            let names = steps.compactMap { step -> String? in
                if case .property(let name, _) = step { return name }
                return nil
            }
            guard names.count == steps.count, let entityType = binding.entityType,
                let collection = mapping.collection(for: names, in: entityType)
            else { throw fail("the collection '\(names.joined(separator: "/"))' is not available locally") }
            let inner = newAlias()
            let elementType = lambda.elementType
            let from: SQLFragment
            var join = SQLFragment("1")
            let item: Item
            if let column = collection.jsonColumn, let path = collection.jsonPath {
                from =
                    "json_each(" + SQLFragment(q(binding.alias) + "." + q(column) + ", ?", [.text(path)])
                    + ") AS "
                    + q(inner)
                item = Item(
                    fragment: SQLFragment(q(inner) + ".\"value\""), encoding: .json, type: elementType)
            } else {
                from = SQLFragment(q(collection.table) + " AS " + q(inner))
                join = SQLFragment(
                    collection.joins.map {
                        "\(q(inner)).\(q($0.targetColumn)) = \(q(binding.alias)).\(q($0.sourceColumn))"
                    }.joined(separator: " AND "))
                item = Item(
                    fragment: SQLFragment(q(inner) + "." + q(collection.valueColumn)),
                    encoding: columnEncoding(elementType), type: elementType)
            }
            let cond = try condition(&self, Binding(alias: inner, entityType: nil, item: item))
            let exists = "EXISTS (SELECT 1 FROM " + from + " WHERE " + join + cond + ")"
            return isAll ? "(NOT " + exists + ")" : exists
        }
        let exists = try existsChain(
            steps[...], alias: binding.alias, entityType: binding.entityType,
            body: { context, alias, type throws(ODataError) in
                try condition(&context, Binding(alias: alias, entityType: type))
            })
        return isAll ? "(NOT " + exists + ")" : exists
    }

    mutating func count(_ path: ODataPropertyPath) throws(ODataError) -> SQLFragment {
        let binding = try start(path.root)
        let steps = path.steps.filter {
            if case .cast = $0 { return false }
            return true
        }
        if case .property? = steps.last {
            let names = steps.map(\.name)
            guard steps.allSatisfy({ if case .property = $0 { true } else { false } }),
                let entityType = binding.entityType,
                let collection = mapping.collection(for: names, in: entityType)
            else { throw fail("the collection '\(names.joined(separator: "/"))' is not available locally") }
            if let column = collection.jsonColumn, let jsonPath = collection.jsonPath {
                return "coalesce(json_array_length("
                    + SQLFragment(q(binding.alias) + "." + q(column) + ", ?", [.text(jsonPath)])
                    + "), 0)"
            }
            let inner = newAlias()
            let join = collection.joins.map {
                "\(q(inner)).\(q($0.targetColumn)) = \(q(binding.alias)).\(q($0.sourceColumn))"
            }
            return SQLFragment(
                "(SELECT COUNT(*) FROM \(q(collection.table)) AS \(q(inner)) WHERE "
                    + join.joined(separator: " AND ") + ")")
        }
        return try countChain(steps[...], alias: binding.alias, entityType: binding.entityType)
    }

    mutating func countChain(_ steps: ArraySlice<ODataPropertyPath.Step>, alias: String, entityType: String?)
        throws(ODataError) -> SQLFragment
    {
        guard let entityType, let first = steps.first, case .navigation(let name, let target, _) = first
        else {
            throw fail("$count is only supported on navigation collections locally")
        }
        guard let nav = mapping.navigation(name, from: entityType) else {
            throw fail("the navigation '\(name)' is not available locally")
        }
        let inner = newAlias()
        // Through a link table, one target may be linked more than once (several sources of the link).
        let counted = nav.linkTable == nil ? "COUNT(*)" : "COUNT(DISTINCT \(q(inner)).rowid)"
        let select: SQLFragment =
            steps.count == 1
            ? SQLFragment(counted) : try countChain(steps.dropFirst(), alias: inner, entityType: target)
        return "(SELECT " + select + " FROM " + fromClause(nav, alias: inner) + " WHERE "
            + joinCondition(nav, outer: alias, inner: inner) + ")"
    }

    // MARK: Functions

    mutating func call(_ function: ODataFunction, _ args: [ODataFilterExpression]) throws(ODataError) -> Value
    {
        if function == .isof { return try isof(args) }
        var values: [Value] = []
        for arg in args {
            if case .typeName = arg { continue }
            var v = try value(arg)
            if let literal = v.literal {
                v = Value(
                    fragment: SQLFragment("?", [SQLDefaults.binding(for: literal, type: nil)]), type: nil)
            }
            values.append(v)
        }
        func a(_ i: Int) -> SQLFragment { values[i].fragment }
        func numeric(_ i: Int) throws(ODataError) -> SQLFragment {
            try number(values[i], "'\(function)'").fragment
        }
        let int = EdmTypeRef(name: "Edm.Int32")
        let string = EdmTypeRef(name: "Edm.String")
        let bool = EdmTypeRef(name: "Edm.Boolean")
        let instant = EdmTypeRef(name: "Edm.DateTimeOffset")
        switch function {
        case .contains: return Value(fragment: "(instr(" + a(0) + ", " + a(1) + ") > 0)", type: bool)
        case .startswith:
            return Value(
                fragment: "(substr(" + a(0) + ", 1, length(" + a(1) + ")) = " + a(1) + ")", type: bool)
        case .endswith:
            return Value(
                fragment: "(length(" + a(1) + ") = 0 OR substr(" + a(0) + ", -length(" + a(1) + ")) = " + a(1)
                    + ")",
                type: bool)
        case .length: return Value(fragment: "length(" + a(0) + ")", type: int)
        case .indexof: return Value(fragment: "(instr(" + a(0) + ", " + a(1) + ") - 1)", type: int)
        case .substring:
            if values.count == 3 {
                return Value(fragment: "substr(" + a(0) + ", (" + a(1) + ") + 1, " + a(2) + ")", type: string)
            }
            return Value(fragment: "substr(" + a(0) + ", (" + a(1) + ") + 1)", type: string)
        case .tolower: return Value(fragment: "lower(" + a(0) + ")", type: string)
        case .toupper: return Value(fragment: "upper(" + a(0) + ")", type: string)
        case .trim: return Value(fragment: "trim(" + a(0) + ")", type: string)
        case .concat: return Value(fragment: "(" + a(0) + " || " + a(1) + ")", type: string)
        case .replace:
            return Value(fragment: "replace(" + a(0) + ", " + a(1) + ", " + a(2) + ")", type: string)
        case .year, .month, .day, .hour, .minute, .second:
            try requireDateText(values[0], function)
            let format = [
                "year": "%Y", "month": "%m", "day": "%d", "hour": "%H", "minute": "%M", "second": "%S",
            ][
                function.rawValue]!
            return Value(fragment: "CAST(strftime('\(format)', " + a(0) + ") AS INTEGER)", type: int)
        case .fractionalseconds:
            try requireDateText(values[0], function)
            return Value(
                fragment: "(CAST(strftime('%f', " + a(0) + ") AS REAL) - CAST(strftime('%S', " + a(0)
                    + ") AS INTEGER))",
                type: EdmTypeRef(name: "Edm.Decimal"))
        case .date:
            try requireDateText(values[0], function)
            return Value(fragment: "date(" + a(0) + ")", type: EdmTypeRef(name: "Edm.Date"))
        case .time:
            try requireDateText(values[0], function)
            return Value(fragment: "time(" + a(0) + ")", type: EdmTypeRef(name: "Edm.TimeOfDay"))
        case .totaloffsetminutes:
            throw fail("totaloffsetminutes() is not answered locally: instants are stored in UTC")
        case .now:
            let format = profile == .exact ? "%Y-%m-%dT%H:%M:%f" : "%Y-%m-%dT%H:%M:%fZ"
            return Value(fragment: SQLFragment("strftime('\(format)', 'now')"), type: instant)
        case .mindatetime:
            let text = profile == .exact ? "0001-01-01T00:00:00" : "0001-01-01T00:00:00Z"
            return Value(fragment: SQLFragment("?", [.text(text)]), type: instant)
        case .maxdatetime:
            let text = profile == .exact ? "9999-12-31T23:59:59.999" : "9999-12-31T23:59:59.999Z"
            return Value(fragment: SQLFragment("?", [.text(text)]), type: instant)
        case .round:
            return Value(fragment: "round(" + (try numeric(0)) + ")", type: values[0].type)
        case .floor:
            let x = try numeric(0)
            return Value(
                fragment: "(CAST(" + x + " AS INTEGER) - (" + x + " < CAST(" + x + " AS INTEGER)))",
                type: values[0].type)
        case .ceiling:
            let x = try numeric(0)
            return Value(
                fragment: "(CAST(" + x + " AS INTEGER) + (" + x + " > CAST(" + x + " AS INTEGER)))",
                type: values[0].type)
        case .isof:
            throw fail("isof() is not supported here")
        case .cast:
            return try cast(values, typeName: args.last)
        }
    }

    func requireDateText(_ v: Value, _ function: ODataFunction) throws(ODataError) {
        if v.encoding == .json, let p = primitive(v.type), p != .date {
            throw fail(
                "\(function.rawValue)() of \(p.rawValue) values read from the stored document is not supported locally"
            )
        }
    }

    func cast(_ values: [Value], typeName: ODataFilterExpression?) throws(ODataError) -> Value {
        guard case .typeName(let typeName)? = typeName, let target = EdmPrimitiveType(rawValue: typeName)
        else {
            throw fail("cast() is only supported locally to primitive types")
        }
        guard let v = values.first else {
            throw fail("cast() of the current entity is not supported locally")
        }
        let type = EdmTypeRef(name: typeName)
        if v.encoding == .decimalKey {
            switch target {
            case .string: return Value(fragment: ODataStorage.decimalPlainSQL(v.fragment), type: type)
            case .decimal: return v
            default: break
            }
        }
        let sqlType: String
        if target.isIntegral {
            sqlType = "INTEGER"
        } else if target == .double || target == .single || target == .decimal {
            sqlType = "REAL"
        } else if target == .string {
            sqlType = "TEXT"
        } else {
            throw fail("cast() to \(typeName) is not supported locally")
        }
        let source = sqlType == "TEXT" ? v.fragment : try number(v, "cast()").fragment
        return Value(fragment: "CAST(" + source + " AS " + sqlType + ")", type: type)
    }

    /// `isof(T)` on the current entity, `isof(path, T)` on an entity reached through single-valued
    /// navigation or on a primitive value (its declared type).
    mutating func isof(_ args: [ODataFilterExpression]) throws(ODataError) -> Value {
        let bool = EdmTypeRef(name: "Edm.Boolean")
        guard case .typeName(let typeName)? = args.last else { throw fail("isof() needs a type name") }
        if args.count == 1 {
            let condition = try typeCondition(
                alias: translator.rootAlias, entityType: translator.rootEntityType, castType: typeName)
            return Value(fragment: condition ?? SQLFragment("1"), type: bool)
        }
        guard case .property(let path) = args[0] else {
            throw fail("isof() of a computed value is not supported locally")
        }
        let binding = try start(path.root)
        let last = path.steps.last
        if binding.item == nil,
            path.steps.isEmpty || { if case .navigation(_, _, false)? = last { true } else { false } }()
        {
            if path.steps.isEmpty {
                let condition = try typeCondition(
                    alias: binding.alias, entityType: binding.entityType ?? translator.rootEntityType,
                    castType: typeName)
                return Value(fragment: condition ?? SQLFragment("1"), type: bool)
            }
            let fragment = try existsChain(
                path.steps[...], alias: binding.alias, entityType: binding.entityType,
                body: { context, alias, type throws(ODataError) in
                    let condition = try context.typeCondition(
                        alias: alias, entityType: type, castType: typeName)
                    return condition.map { " AND " + $0 } ?? SQLFragment("")
                })
            return Value(fragment: fragment, type: bool)
        }
        // A structural value: its declared type decides (complex values of derived types are not told apart).
        guard let declared = path.type, !declared.isCollection else {
            throw fail("isof() of a collection is not supported locally")
        }
        if let model, model.structuredType(declared.name) != nil,
            !model.derivedTypes(of: declared.name).isEmpty
        {
            throw fail("isof() of complex values with derived types is not supported locally")
        }
        let value = try property(path)
        let same =
            model?.resolveQualifiedName(typeName) == declared.name
            || (model.map { m in m.structuredType(typeName)?.qualifiedName == declared.name } ?? false)
        return Value(fragment: same ? "(" + value.fragment + " IS NOT NULL)" : SQLFragment("0"), type: bool)
    }
}
