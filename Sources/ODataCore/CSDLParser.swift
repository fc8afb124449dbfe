import Foundation

/// Parses `$metadata` documents (V4 CSDL XML and V2 EDMX) into an ``EdmModel``.
///
/// Promises: parsed by ``SafeXML`` (no DTD, no entities, nothing fetched, bounded by
/// ``SafeXML/Limits/metadata``); malformed XML or a document without `Edmx`/`Schema`
/// throws ``ODataError`` of kind `.metadata`; unknown elements and attributes are ignored; sloppy but
/// common V2 metadata (unqualified type names, duplicated containers, constraints without a
/// `ReferentialConstraint` wrapper) is accepted.
public enum CSDLParser {
    /// Parses the metadata document bytes.
    public static func parse(_ data: [UInt8]) throws(ODataError) -> EdmModel {
        let root: XNode
        do {
            root = try SafeXML.parse(data, limits: .metadata)
        } catch {
            throw ODataError(.metadata, "the metadata document is refused: \(error.message)")
        }
        return try interpret(root)
    }

    /// Parses the metadata document text.
    public static func parse(_ text: String) throws(ODataError) -> EdmModel {
        try parse(Array(text.utf8))
    }

    // MARK: - Interpretation

    private static func interpret(_ root: XNode) throws(ODataError) -> EdmModel {
        guard root.local == "Edmx" else {
            throw ODataError(.metadata, "the root element is <\(root.name)>, expected <edmx:Edmx>")
        }
        let edmxVersion = root.attributes["Version"]
        let dataServices = root.children.first { $0.local == "DataServices" }
        guard let dataServices else { throw ODataError(.metadata, "no <edmx:DataServices> element") }
        let dsv = dataServices.attribute(local: "DataServiceVersion")
        let isV4 = (edmxVersion?.hasPrefix("4") ?? false) || root.namespaceURI.contains("oasis-open.org")
        var model = EdmModel(version: isV4 ? .v4 : .v2)
        model.edmxVersion = edmxVersion
        model.dataServiceVersion = dsv
        let schemaNodes = dataServices.children.filter { $0.local == "Schema" }
        guard !schemaNodes.isEmpty else { throw ODataError(.metadata, "no <Schema> element") }
        for node in schemaNodes {
            guard let ns = node.attributes["Namespace"] else {
                throw ODataError(.metadata, "a <Schema> has no Namespace")
            }
            model.schemas.append(EdmSchema(namespace: ns, alias: node.attributes["Alias"]))
        }
        var optimisticConcurrency: [(target: String, properties: [String])] = []
        var propertyTerms: [(target: String, term: CoreTerm)] = []
        for node in schemaNodes {
            let ns = node.attributes["Namespace"] ?? ""
            for child in node.children {
                switch child.local {
                case "EntityType", "ComplexType":
                    model.addStructured(
                        structuredType(child, namespace: ns, entity: child.local == "EntityType"))
                case "EnumType":
                    let e = enumType(child, namespace: ns)
                    model.enumTypes[e.qualifiedName] = e
                case "TypeDefinition":
                    let d = typeDefinition(child, namespace: ns)
                    model.typeDefinitions[d.qualifiedName] = d
                case "Association":
                    let a = association(child, namespace: ns)
                    model.associations[a.qualifiedName] = a
                case "Function", "Action":
                    model.operations.append(operation(child, namespace: ns))
                case "EntityContainer":
                    if model.containerName == nil { model.containerName = child.attributes["Name"] }
                    container(child, into: &model)
                case "Annotations":
                    guard let target = child.attributes["Target"] else { continue }
                    for annotation in child.children where annotation.local == "Annotation" {
                        if isOptimisticConcurrency(annotation.attributes["Term"]) {
                            optimisticConcurrency.append((target, propertyPaths(annotation)))
                        } else if let term = coreTerm(annotation) {
                            propertyTerms.append((target, term))
                        }
                    }
                default:
                    continue
                }
            }
        }
        model.resolveNames()
        model.resolveTypeDefinitions()
        model.resolveV2Navigation()
        model.resolvePartners()
        model.resolvePartnerConstraints()
        model.completeOperationImports()
        model.applyOptimisticConcurrency(optimisticConcurrency)
        model.applyPropertyTerms(propertyTerms)
        return model
    }

    /// The `Core` vocabulary terms on properties that decide what a client must or may write.
    enum CoreTerm {
        case computed, immutable
    }

    /// The term of an `<Annotation>` when it is `Core.Computed` or `Core.Immutable` (alias `Core` or the
    /// vocabulary's namespace) with a true value (`Bool="true"` or no value: the term's default).
    static func coreTerm(_ annotation: XNode) -> CoreTerm? {
        guard let term = annotation.attributes["Term"] else { return nil }
        let name: Substring
        if term.hasPrefix("Core.") {
            name = term.dropFirst("Core.".count)
        } else if term.hasPrefix("Org.OData.Core.V1.") {
            name = term.dropFirst("Org.OData.Core.V1.".count)
        } else {
            return nil
        }
        if let value = annotation.attributes["Bool"], value.lowercased() != "true" { return nil }
        if annotation.children.contains(where: { $0.local == "Bool" && $0.text.trimmingSpaces() != "true" }) {
            return nil
        }
        switch name {
        case "Computed": return .computed
        case "Immutable": return .immutable
        default: return nil
        }
    }

    private static func isOptimisticConcurrency(_ term: String?) -> Bool {
        guard let term else { return false }
        return term.hasSuffix(".OptimisticConcurrency")
    }

    private static func propertyPaths(_ annotation: XNode) -> [String] {
        var paths: [String] = []
        func walk(_ node: XNode) {
            if node.local == "PropertyPath", !node.text.isEmpty { paths.append(node.text.trimmingSpaces()) }
            for child in node.children { walk(child) }
        }
        walk(annotation)
        return paths
    }

    private static let knownAttributes: Set<String> = [
        "Name", "Type", "Nullable", "MaxLength", "Precision", "Scale", "DefaultValue", "ConcurrencyMode",
        "Unicode", "FixedLength", "SRID", "Relationship", "FromRole", "ToRole", "Partner", "ContainsTarget",
        "BaseType", "Abstract", "OpenType", "HasStream", "EntityType",
    ]

    private static func extraAttributes(_ node: XNode) -> [String: String] {
        var extra: [String: String] = [:]
        for (key, value) in node.attributes where !knownAttributes.contains(key) && !key.hasPrefix("xmlns") {
            extra[key] = value
        }
        return extra
    }

    private static func property(_ node: XNode) -> EdmProperty {
        let a = node.attributes
        let maxLength = a["MaxLength"]
        let isMax = maxLength.map { $0.lowercased() == "max" } ?? false
        var property = EdmProperty(
            name: a["Name"] ?? "",
            type: EdmTypeRef(parsing: a["Type"] ?? "Edm.String"),
            nullable: (a["Nullable"]?.lowercased() ?? "true") != "false",
            maxLength: isMax ? nil : maxLength.flatMap { Int($0) },
            isMaxLengthMax: isMax,
            precision: a["Precision"].flatMap { Int($0) },
            scale: a["Scale"].flatMap { Int($0) },
            defaultValue: a["DefaultValue"],
            isConcurrencyToken: a["ConcurrencyMode"] == "Fixed",
            annotations: extraAttributes(node))
        for child in node.children where child.local == "Annotation" {
            switch coreTerm(child) {
            case .computed: property.isComputed = true
            case .immutable: property.isImmutable = true
            case nil: continue
            }
        }
        property.isScaleVariable = isVariableScale(a["Scale"])
        property.srid = a["SRID"]
        property.isUnicode = a["Unicode"].map { $0.lowercased() != "false" }
        return property
    }

    private static func isVariableScale(_ scale: String?) -> Bool {
        guard let scale = scale?.lowercased() else { return false }
        return scale == "variable" || scale == "floating"
    }

    private static func typeDefinition(_ node: XNode, namespace: String) -> EdmTypeDefinition {
        let a = node.attributes
        let maxLength = a["MaxLength"]
        let isMax = maxLength.map { $0.lowercased() == "max" } ?? false
        return EdmTypeDefinition(
            namespace: namespace, name: a["Name"] ?? "", underlyingType: a["UnderlyingType"] ?? "Edm.String",
            maxLength: isMax ? nil : maxLength.flatMap { Int($0) }, isMaxLengthMax: isMax,
            precision: a["Precision"].flatMap { Int($0) }, scale: a["Scale"].flatMap { Int($0) },
            isScaleVariable: isVariableScale(a["Scale"]), srid: a["SRID"],
            isUnicode: a["Unicode"].map { $0.lowercased() != "false" }, annotations: extraAttributes(node))
    }

    private static func structuredType(_ node: XNode, namespace: String, entity: Bool) -> EdmStructuredType {
        let a = node.attributes
        var type = EdmStructuredType(
            namespace: namespace, name: a["Name"] ?? "", isEntity: entity, baseType: a["BaseType"],
            isAbstract: a["Abstract"] == "true", isOpen: a["OpenType"] == "true",
            hasStream: node.attribute(local: "HasStream") == "true", annotations: extraAttributes(node))
        for child in node.children {
            switch child.local {
            case "Key":
                type.key = child.children.filter { $0.local == "PropertyRef" }.compactMap {
                    $0.attributes["Name"]
                }
            case "Property":
                type.properties.append(property(child))
            case "NavigationProperty":
                let c = child.attributes
                if let relationship = c["Relationship"] {
                    type.navigationProperties.append(
                        EdmNavigationProperty(
                            name: c["Name"] ?? "", target: "", isCollection: false,
                            relationship: relationship,
                            fromRole: c["FromRole"], toRole: c["ToRole"], annotations: extraAttributes(child))
                    )
                } else {
                    let ref = EdmTypeRef(parsing: c["Type"] ?? "")
                    let constraints = child.children.filter { $0.local == "ReferentialConstraint" }.map {
                        EdmReferentialConstraint(
                            property: $0.attributes["Property"] ?? "",
                            referencedProperty: $0.attributes["ReferencedProperty"] ?? "")
                    }
                    type.navigationProperties.append(
                        EdmNavigationProperty(
                            name: c["Name"] ?? "", target: ref.name, isCollection: ref.isCollection,
                            nullable: (c["Nullable"] ?? "true") != "false", partner: c["Partner"],
                            containsTarget: c["ContainsTarget"] == "true",
                            referentialConstraints: constraints,
                            annotations: extraAttributes(child),
                            onDelete: child.children.first { $0.local == "OnDelete" }?.attributes["Action"]))
                }
            default:
                continue
            }
        }
        return type
    }

    private static func enumType(_ node: XNode, namespace: String) -> EdmEnumType {
        var members: [EdmEnumType.Member] = []
        for (index, member) in node.children.filter({ $0.local == "Member" }).enumerated() {
            let value = member.attributes["Value"].flatMap { Int64($0) } ?? Int64(index)
            members.append(EdmEnumType.Member(name: member.attributes["Name"] ?? "", value: value))
        }
        return EdmEnumType(
            namespace: namespace, name: node.attributes["Name"] ?? "",
            underlyingType: node.attributes["UnderlyingType"] ?? "Edm.Int32",
            isFlags: node.attributes["IsFlags"]?.lowercased() == "true", members: members)
    }

    private static func association(_ node: XNode, namespace: String) -> EdmAssociation {
        var result = EdmAssociation(
            namespace: namespace, name: node.attributes["Name"] ?? "", ends: [], principalRole: nil,
            principalProperties: [], dependentRole: nil, dependentProperties: [],
            annotations: extraAttributes(node))
        func readConstraint(_ parent: XNode) {
            for child in parent.children {
                let refs = child.children.filter { $0.local == "PropertyRef" }.compactMap {
                    $0.attributes["Name"]
                }
                if child.local == "Principal" {
                    result.principalRole = child.attributes["Role"]
                    result.principalProperties = refs
                } else if child.local == "Dependent" {
                    result.dependentRole = child.attributes["Role"]
                    result.dependentProperties = refs
                }
            }
        }
        for child in node.children {
            if child.local == "End" {
                result.ends.append(
                    EdmAssociationEnd(
                        role: child.attributes["Role"] ?? "", type: child.attributes["Type"] ?? "",
                        multiplicity: child.attributes["Multiplicity"] ?? "1",
                        onDelete: child.children.first { $0.local == "OnDelete" }?.attributes["Action"]))
            } else if child.local == "ReferentialConstraint" {
                readConstraint(child)
            }
        }
        if result.principalRole == nil { readConstraint(node) }
        return result
    }

    private static func parameters(_ node: XNode) -> [EdmParameter] {
        node.children.filter { $0.local == "Parameter" }.map {
            EdmParameter(
                name: $0.attributes["Name"] ?? "",
                type: EdmTypeRef(parsing: $0.attributes["Type"] ?? "Edm.String"),
                nullable: ($0.attributes["Nullable"] ?? "true") != "false", mode: $0.attributes["Mode"])
        }
    }

    private static func operation(_ node: XNode, namespace: String) -> EdmOperation {
        let a = node.attributes
        let returnNode = node.children.first { $0.local == "ReturnType" }
        return EdmOperation(
            kind: node.local == "Action" ? .action : .function, namespace: namespace, name: a["Name"] ?? "",
            isBound: a["IsBound"] == "true", isComposable: a["IsComposable"] == "true",
            entitySetPath: a["EntitySetPath"], parameters: parameters(node),
            returnType: (returnNode?.attributes["Type"] ?? a["ReturnType"]).map { EdmTypeRef(parsing: $0) })
    }

    private static func container(_ node: XNode, into model: inout EdmModel) {
        for child in node.children {
            let a = child.attributes
            switch child.local {
            case "EntitySet", "Singleton":
                var bindings: [String: String] = [:]
                for b in child.children where b.local == "NavigationPropertyBinding" {
                    if let path = b.attributes["Path"], let target = b.attributes["Target"] {
                        bindings[path] = target
                    }
                }
                let isSingleton = child.local == "Singleton"
                model.entitySets.append(
                    EdmEntitySet(
                        name: a["Name"] ?? "", entityType: (isSingleton ? a["Type"] : a["EntityType"]) ?? "",
                        isSingleton: isSingleton, navigationBindings: bindings,
                        annotations: extraAttributes(child)))
            case "AssociationSet":
                let ends = child.children.filter { $0.local == "End" }.map {
                    EdmAssociationSetEnd(
                        role: $0.attributes["Role"] ?? "", entitySet: $0.attributes["EntitySet"] ?? "")
                }
                model.associationSets.append(
                    EdmAssociationSet(name: a["Name"] ?? "", association: a["Association"] ?? "", ends: ends))
            case "FunctionImport" where model.version == .v2 || a["Function"] == nil:
                model.operationImports.append(
                    EdmOperationImport(
                        kind: .functionImportV2, name: a["Name"] ?? "", operation: nil,
                        entitySet: a["EntitySet"],
                        httpMethod: child.attribute(local: "HttpMethod") ?? "GET",
                        parameters: parameters(child),
                        returnType: a["ReturnType"].map { EdmTypeRef(parsing: $0) },
                        annotations: extraAttributes(child)))
            case "FunctionImport", "ActionImport":
                let isAction = child.local == "ActionImport"
                model.operationImports.append(
                    EdmOperationImport(
                        kind: isAction ? .actionImport : .functionImport, name: a["Name"] ?? "",
                        operation: isAction ? a["Action"] : a["Function"], entitySet: a["EntitySet"],
                        httpMethod: isAction ? "POST" : "GET", parameters: [], returnType: nil,
                        annotations: extraAttributes(child)))
            default:
                continue
            }
        }
    }
}

// MARK: - Model resolution

extension EdmModel {
    fileprivate mutating func addStructured(_ type: EdmStructuredType) {
        structuredTypes[type.qualifiedName] = type
    }

    /// Resolves aliases and unqualified names in a type name as written in schema `namespace`.
    fileprivate func qualify(_ name: String, in namespace: String) -> String {
        if name.hasPrefix("Edm.") || name.isEmpty { return name }
        let resolved = resolveQualifiedName(name)
        func known(_ n: String) -> Bool {
            structuredTypes[n] != nil || enumTypes[n] != nil || associations[n] != nil
                || typeDefinitions[n] != nil
        }
        if known(resolved) { return resolved }
        if !name.contains(".") {
            let local = namespace + "." + name
            if known(local) { return local }
            for schema in schemas where known(schema.namespace + "." + name) {
                return schema.namespace + "." + name
            }
        } else if let dot = name.lastIndex(of: ".") {
            // A sloppy service may qualify with the container's or another schema's namespace.
            let simple = String(name[name.index(after: dot)...])
            let matches = structuredTypes.keys.filter { $0.hasSuffix("." + simple) }
            if matches.count == 1, let only = matches.first { return only }
        }
        return resolved
    }

    fileprivate func qualify(_ ref: EdmTypeRef, in namespace: String) -> EdmTypeRef {
        EdmTypeRef(name: qualify(ref.name, in: namespace), isCollection: ref.isCollection)
    }

    fileprivate mutating func resolveNames() {
        let defaultNamespace = schemas.first?.namespace ?? ""
        for (key, var type) in structuredTypes {
            let ns = type.namespace
            type.baseType = type.baseType.map { qualify($0, in: ns) }
            for i in type.properties.indices {
                type.properties[i].type = qualify(type.properties[i].type, in: ns)
            }
            for i in type.navigationProperties.indices {
                let nav = type.navigationProperties[i]
                if nav.relationship != nil {
                    type.navigationProperties[i].relationship = qualify(nav.relationship!, in: ns)
                } else {
                    type.navigationProperties[i].target = qualify(nav.target, in: ns)
                }
            }
            structuredTypes[key] = type
        }
        for (key, var association) in associations {
            for i in association.ends.indices {
                association.ends[i].type = qualify(association.ends[i].type, in: association.namespace)
            }
            associations[key] = association
        }
        for i in entitySets.indices {
            entitySets[i].entityType = qualify(entitySets[i].entityType, in: defaultNamespace)
        }
        for i in associationSets.indices {
            associationSets[i].association = qualify(associationSets[i].association, in: defaultNamespace)
        }
        for i in operations.indices {
            let ns = operations[i].namespace
            operations[i].returnType = operations[i].returnType.map { qualify($0, in: ns) }
            for j in operations[i].parameters.indices {
                operations[i].parameters[j].type = qualify(operations[i].parameters[j].type, in: ns)
            }
        }
        for i in operationImports.indices {
            operationImports[i].returnType = operationImports[i].returnType.map {
                qualify($0, in: defaultNamespace)
            }
            operationImports[i].operation = operationImports[i].operation.map { resolveQualifiedName($0) }
            for j in operationImports[i].parameters.indices {
                operationImports[i].parameters[j].type = qualify(
                    operationImports[i].parameters[j].type, in: defaultNamespace)
            }
        }
    }

    /// Properties declared with a `TypeDefinition` get its underlying primitive type and, where they set
    /// none, its facets; the definition's name is kept in ``EdmProperty/typeDefinition``.
    fileprivate mutating func resolveTypeDefinitions() {
        guard !typeDefinitions.isEmpty else { return }
        for i in operations.indices {
            operations[i].returnType = operations[i].returnType.map(underlying)
            for j in operations[i].parameters.indices {
                operations[i].parameters[j].type = underlying(operations[i].parameters[j].type)
            }
        }
        for i in operationImports.indices {
            operationImports[i].returnType = operationImports[i].returnType.map(underlying)
            for j in operationImports[i].parameters.indices {
                operationImports[i].parameters[j].type = underlying(operationImports[i].parameters[j].type)
            }
        }
        for (key, var type) in structuredTypes {
            for i in type.properties.indices {
                guard let definition = typeDefinitions[type.properties[i].type.name] else { continue }
                var p = type.properties[i]
                p.typeDefinition = definition.qualifiedName
                p.type = EdmTypeRef(name: definition.underlyingType, isCollection: p.type.isCollection)
                if p.maxLength == nil && !p.isMaxLengthMax {
                    p.maxLength = definition.maxLength
                    p.isMaxLengthMax = definition.isMaxLengthMax
                }
                if p.precision == nil { p.precision = definition.precision }
                if p.scale == nil && !p.isScaleVariable {
                    p.scale = definition.scale
                    p.isScaleVariable = definition.isScaleVariable
                }
                if p.srid == nil { p.srid = definition.srid }
                if p.isUnicode == nil { p.isUnicode = definition.isUnicode }
                type.properties[i] = p
            }
            structuredTypes[key] = type
        }
    }

    private func underlying(_ ref: EdmTypeRef) -> EdmTypeRef {
        guard let definition = typeDefinitions[ref.name] else { return ref }
        return EdmTypeRef(name: definition.underlyingType, isCollection: ref.isCollection)
    }

    /// V4: a navigation named as `Partner` by another gets that one as its partner when it names none, so
    /// partners are known in both directions.
    fileprivate mutating func resolvePartners() {
        guard version == .v4 else { return }
        let snapshot = structuredTypes
        for (key, var type) in structuredTypes {
            for i in type.navigationProperties.indices where type.navigationProperties[i].partner == nil {
                let nav = type.navigationProperties[i]
                // A navigation on the target type (or its bases) whose partner is this one and whose
                // target is this type or one of its bases.
                var current: EdmStructuredType? = snapshot[nav.target]
                var found: String?
                var steps = 0
                while let t = current, found == nil, steps < 64 {
                    found =
                        t.navigationProperties.first {
                            $0.partner == nav.name && isType(type.qualifiedName, derivedFrom: $0.target)
                        }?.name
                    current = t.baseType.flatMap { snapshot[$0] }
                    steps += 1
                }
                if let found { type.navigationProperties[i].partner = found }
            }
            structuredTypes[key] = type
        }
    }

    /// V2: target type, multiplicity and oriented constraints from the Association; bindings from the
    /// AssociationSets.
    fileprivate mutating func resolveV2Navigation() {
        for (key, var type) in structuredTypes {
            for i in type.navigationProperties.indices {
                let nav = type.navigationProperties[i]
                guard let relationship = nav.relationship, let association = associations[relationship],
                    let toRole = nav.toRole, let toEnd = association.end(role: toRole)
                else { continue }
                type.navigationProperties[i].target = toEnd.type
                type.navigationProperties[i].isCollection = toEnd.multiplicity == "*"
                if let fromRole = nav.fromRole {
                    type.navigationProperties[i].onDelete = association.end(role: fromRole)?.onDelete
                }
                type.navigationProperties[i].nullable = toEnd.multiplicity != "1"
                if let principal = association.principalRole, let dependent = association.dependentRole,
                    association.principalProperties.count == association.dependentProperties.count
                {
                    let pairs = zip(association.principalProperties, association.dependentProperties)
                    if nav.fromRole == dependent && toRole == principal {
                        type.navigationProperties[i].referentialConstraints = pairs.map {
                            EdmReferentialConstraint(property: $0.1, referencedProperty: $0.0)
                        }
                    } else if nav.fromRole == principal && toRole == dependent {
                        type.navigationProperties[i].referentialConstraints = pairs.map {
                            EdmReferentialConstraint(property: $0.0, referencedProperty: $0.1)
                        }
                    }
                }
                // The partner is the navigation property of the other end going back.
                if let other = structuredTypes[toEnd.type] {
                    type.navigationProperties[i].partner =
                        other.navigationProperties.first {
                            $0.relationship == relationship && $0.fromRole == toRole
                                && $0.toRole == nav.fromRole
                        }?.name
                }
            }
            structuredTypes[key] = type
        }
        for associationSet in associationSets {
            guard let association = associations[associationSet.association] else { continue }
            for end in associationSet.ends {
                guard let setIndex = entitySets.firstIndex(where: { $0.name == end.entitySet }),
                    let other = associationSet.ends.first(where: { $0.role != end.role })
                        ?? associationSet.ends.last
                else { continue }
                let setType = entitySets[setIndex].entityType
                for nav in navigationProperties(of: setType)
                where nav.relationship == association.qualifiedName && nav.fromRole == end.role
                    && nav.toRole == other.role
                {
                    entitySets[setIndex].navigationBindings[nav.name] = other.entitySet
                }
            }
        }
    }

    /// V4: a navigation without its own constraint gets the reversed constraint of its partner.
    fileprivate mutating func resolvePartnerConstraints() {
        guard version == .v4 else { return }
        let snapshot = structuredTypes
        for (key, var type) in structuredTypes {
            for i in type.navigationProperties.indices
            where type.navigationProperties[i].referentialConstraints.isEmpty {
                let nav = type.navigationProperties[i]
                guard let partnerName = nav.partner, let target = snapshot[nav.target] else { continue }
                var partner: EdmNavigationProperty?
                var current: EdmStructuredType? = target
                var guardCount = 0
                while let t = current, partner == nil, guardCount < 64 {
                    partner = t.navigationProperties.first { $0.name == partnerName }
                    current = t.baseType.flatMap { snapshot[$0] }
                    guardCount += 1
                }
                if let partner {
                    type.navigationProperties[i].referentialConstraints = partner.referentialConstraints.map {
                        EdmReferentialConstraint(
                            property: $0.referencedProperty, referencedProperty: $0.property)
                    }
                }
            }
            structuredTypes[key] = type
        }
    }

    /// Marks the properties that out-of-line `<Annotations Target="NS.Type/Property">` annotate with
    /// `Core.Computed` or `Core.Immutable`.
    fileprivate mutating func applyPropertyTerms(_ terms: [(target: String, term: CSDLParser.CoreTerm)]) {
        for (target, term) in terms {
            let parts = target.split(separator: "/")
            guard parts.count == 2, let type = structuredType(String(parts[0])) else { continue }
            let key = type.qualifiedName
            guard var t = structuredTypes[key],
                let i = t.properties.firstIndex(where: { $0.name == parts[1] })
            else { continue }
            switch term {
            case .computed: t.properties[i].isComputed = true
            case .immutable: t.properties[i].isImmutable = true
            }
            structuredTypes[key] = t
        }
    }

    fileprivate mutating func completeOperationImports() {
        for i in operationImports.indices where operationImports[i].kind != .functionImportV2 {
            guard let name = operationImports[i].operation,
                let op = operations.first(where: { $0.qualifiedName == name })
            else { continue }
            operationImports[i].parameters = op.parameters
            operationImports[i].returnType = op.returnType
        }
    }

    fileprivate mutating func applyOptimisticConcurrency(
        _ annotations: [(target: String, properties: [String])]
    ) {
        for (target, properties) in annotations {
            // Target is `Container/EntitySet` (or an alias-qualified form); mark the set's entity type.
            let setName = target.split(separator: "/").last.map(String.init) ?? target
            guard let set = entitySet(named: setName), var type = structuredTypes[set.entityType] else {
                continue
            }
            var remaining = Set(properties)
            for i in type.properties.indices where remaining.contains(type.properties[i].name) {
                type.properties[i].isConcurrencyToken = true
                remaining.remove(type.properties[i].name)
            }
            structuredTypes[set.entityType] = type
            // Inherited properties: mark on the declaring base type.
            for base in typeHierarchy(of: set.entityType).dropFirst() where !remaining.isEmpty {
                var b = base
                for i in b.properties.indices where remaining.contains(b.properties[i].name) {
                    b.properties[i].isConcurrencyToken = true
                    remaining.remove(b.properties[i].name)
                }
                structuredTypes[b.qualifiedName] = b
            }
        }
    }
}

// MARK: - The XML tree

/// An element of the parsed metadata document (``SafeXML`` builds it).
typealias XNode = SafeXML.Element
