import Foundation
import FoundationXML
import JSONCore
import ODataCore

/// Writes what a local read found (``LocalResult``) as OData V2 Atom/XML, the format SAP Gateway answers
/// by default: feeds and entries (`atom:feed`/`atom:entry` with `m:properties` in `content`, `m:count`
/// for `$inlinecount`, `link rel="next"`, `link rel=".../related/Nav"` with `m:inline` for `$expand`,
/// `m:etag`), single properties (`d:Name`), `$links` (`links`/`uri`) and the service document
/// (`app:service`). Values are written in their Atom forms (`Edm.DateTime` as `2025-08-30T00:00:00`,
/// `Edm.DateTimeOffset` in UTC with `Z`, nulls as `m:null="true"`). Built with FoundationXML (libxml2),
/// never by string concatenation. Pure: no SQL, no I/O.
struct ODataAtomSerializer {
    let m: MirrorModel
    /// The gateway's service root as the client sees it.
    let root: String
    /// `updated` of feeds and entries.
    let now: String
    /// The resource path asked for, relative to `root` (`Categories(2)/Products`): a feed's `id` and
    /// `self` link, as SAP Gateway writes them for a feed reached over a navigation. Empty: the set's.
    let path: String

    static let atom = "http://www.w3.org/2005/Atom"
    static let metadataNS = "http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"
    static let dataNS = "http://schemas.microsoft.com/ado/2007/08/dataservices"
    static let scheme = "http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"
    static let related = "http://schemas.microsoft.com/ado/2007/08/dataservices/related/"

    init(model: MirrorModel, root: String, path: String = "", now: String = iso8601Now()) {
        self.m = model
        self.root = root
        self.now = now
        self.path = path.hasPrefix("/") ? String(path.dropFirst()) : path
    }

    /// The Atom answer for `result`; nil when the result has no Atom form (JSON's is used).
    func render(_ result: LocalResult) -> LocalReadResponse? {
        switch result {
        case .collection(let entries, let total, let next, let set, _, _):
            let feed = element("feed", namespaces: true)
            feed.addAttribute(attribute("xml:base", root))
            let href = path.isEmpty ? set : path
            // The title is the set's, or the navigation property's for `Categories(2)/Products`.
            let last = href.split(separator: "/").last.map { String($0.prefix { $0 != "(" }) } ?? set
            addCommon(feed, id: root + href, title: last)
            feed.addChild(link(href: href, rel: "self", title: last))
            if let total { feed.addChild(element("m:count", text: String(total))) }
            for e in entries { feed.addChild(entry(e, namespaces: false)) }
            if let next { feed.addChild(link(href: next, rel: "next", title: nil)) }
            return xml(feed, type: "application/atom+xml;type=feed;charset=utf-8")
        case .entity(let e, _, _, _):
            let node = entry(e, namespaces: true)
            node.addAttribute(attribute("xml:base", root))
            var response = xml(node, type: "application/atom+xml;type=entry;charset=utf-8")
            response.etag = e.etag
            return response
        case .property(let name, let type, let value, _):
            // `d:Name` as SAP Gateway writes it: the `d` prefix bound on the element itself.
            let node = property(name, value, type: type)
            node.addNamespace(namespace("d", Self.dataNS))
            node.addNamespace(namespace("m", Self.metadataNS))
            return xml(node, type: "application/xml;charset=utf-8")
        case .reference(let e):
            let node = XMLElement(name: "uri", stringValue: ODataJSONSerializer.id(e, model: m, root: root))
            node.addNamespace(namespace("", Self.dataNS))
            return xml(node, type: "application/xml;charset=utf-8")
        case .references(let entries, let total, let next):
            let node = XMLElement(name: "links")
            node.addNamespace(namespace("", Self.dataNS))
            if let total {
                node.addNamespace(namespace("m", Self.metadataNS))
                node.addChild(element("m:count", text: String(total)))
            }
            for e in entries {
                node.addChild(
                    XMLElement(name: "uri", stringValue: ODataJSONSerializer.id(e, model: m, root: root)))
            }
            if let next { node.addChild(element("next", text: next)) }
            return xml(node, type: "application/xml;charset=utf-8")
        case .serviceDocument:
            let service = XMLElement(name: "app:service")
            service.addNamespace(namespace("app", "http://www.w3.org/2007/app"))
            service.addNamespace(namespace("atom", Self.atom))
            service.addAttribute(attribute("xml:base", root))
            let workspace = XMLElement(name: "app:workspace")
            workspace.addChild(element("atom:title", text: "Data", type: "text"))
            for set in m.model.entitySets where !set.isSingleton {
                let collection = XMLElement(name: "app:collection")
                collection.addAttribute(attribute("href", set.name))
                collection.addChild(element("atom:title", text: set.name, type: "text"))
                workspace.addChild(collection)
            }
            service.addChild(workspace)
            return xml(service, type: "application/atomsvc+xml;charset=utf-8")
        case .metadata, .count, .rawValue:
            return nil
        }
    }

    // MARK: pieces

    func entry(_ e: LocalEntry, namespaces: Bool) -> XMLElement {
        let node = element("entry", namespaces: namespaces)
        if let etag = e.etag { node.addAttribute(attribute("m:etag", etag)) }
        let id = ODataJSONSerializer.id(e, model: m, root: root)
        let relative = String(id.dropFirst(root.count))
        addCommon(node, id: id, title: relative)
        let qualified = m.types[e.entityType]?.qualifiedName ?? e.entityType
        let category = XMLElement(name: "category")
        category.addAttribute(attribute("term", qualified))
        category.addAttribute(attribute("scheme", Self.scheme))
        node.addChild(category)
        node.addChild(link(href: relative, rel: "edit", title: m.model.structuredType(qualified)?.name))
        let expanded = Dictionary(e.expanded.map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a })
        for nav in m.model.navigationProperties(of: e.entityType)
        where expanded[nav.name] != nil || (e.selected?.contains(nav.name) ?? true) {
            let kind = nav.isCollection ? "feed" : "entry"
            let l = link(href: relative + "/" + nav.name, rel: Self.related + nav.name, title: nav.name)
            l.addAttribute(attribute("type", "application/atom+xml;type=" + kind))
            if let x = expanded[nav.name] {
                let inline = XMLElement(name: "m:inline")
                switch x {
                case .many(let entries, let count):
                    let feed = XMLElement(name: "feed")
                    addCommon(feed, id: id + "/" + nav.name, title: nav.name)
                    if let count { feed.addChild(element("m:count", text: String(count))) }
                    for child in entries { feed.addChild(entry(child, namespaces: false)) }
                    inline.addChild(feed)
                case .one(let child):
                    if let child { inline.addChild(entry(child, namespaces: false)) }
                }
                l.addChild(inline)
            }
            node.addChild(l)
        }
        let content = XMLElement(name: "content")
        content.addAttribute(attribute("type", "application/xml"))
        let properties = XMLElement(name: "m:properties")
        let declared = m.model.properties(of: e.entityType)
        for p in declared where e.selected?.contains(p.name) ?? true {
            properties.addChild(
                property(p.name, e.properties.first { $0.0 == p.name }?.1 ?? .null, type: p.type))
        }
        // Values the model does not declare (computed, dynamic): as they are.
        for (name, value) in e.properties where !declared.contains(where: { $0.name == name }) {
            if e.selected?.contains(name) ?? true { properties.addChild(property(name, value, type: nil)) }
        }
        content.addChild(properties)
        node.addChild(content)
        return node
    }

    /// `d:Name` with the value's Atom text, `m:null="true"`, or nested properties of a complex value.
    func property(_ name: String, _ value: RawJSON, type: EdmTypeRef?) -> XMLElement {
        let node = XMLElement(name: "d:" + name)
        switch value {
        case .null:
            node.addAttribute(attribute("m:null", "true"))
        case .object(let members):
            let complex = type.flatMap { m.model.structuredType($0.name) }
            if let complex { node.addAttribute(attribute("m:type", complex.qualifiedName)) }
            for (key, inner) in members where key != "__metadata" {
                let innerType = complex.flatMap { m.model.property(named: key, in: $0.qualifiedName)?.type }
                node.addChild(property(key, inner, type: innerType))
            }
        case .array(let items):
            for item in items { node.addChild(property("element", item, type: nil)) }
        default:
            node.stringValue = Self.text(value, type: type.flatMap { m.model.primitiveType(of: $0) })
        }
        return node
    }

    /// The Atom text of a V2 JSON scalar.
    static func text(_ value: RawJSON, type: EdmPrimitiveType?) -> String {
        switch value {
        case .bool(let b): return b ? "true" : "false"
        case .number(let n): return n
        case .string(let s):
            if let (ms, _) = ODataStorage.v2Date(s) {
                return MirrorColumn.isoFromMillis(ms, utc: type == .dateTimeOffset)
            }
            return s
        default: return value.serialized()
        }
    }

    func addCommon(_ node: XMLElement, id: String, title: String) {
        node.addChild(element("id", text: id))
        node.addChild(element("title", text: title, type: "text"))
        node.addChild(element("updated", text: now))
        let author = XMLElement(name: "author")
        author.addChild(XMLElement(name: "name"))
        node.addChild(author)
    }

    func link(href: String, rel: String, title: String?) -> XMLElement {
        let l = XMLElement(name: "link")
        l.addAttribute(attribute("href", href))
        l.addAttribute(attribute("rel", rel))
        if let title { l.addAttribute(attribute("title", title)) }
        return l
    }

    func element(_ name: String, namespaces: Bool) -> XMLElement {
        let node = XMLElement(name: name)
        if namespaces {
            node.addNamespace(namespace("", Self.atom))
            node.addNamespace(namespace("m", Self.metadataNS))
            node.addNamespace(namespace("d", Self.dataNS))
        }
        return node
    }

    func element(_ name: String, text: String, type: String? = nil) -> XMLElement {
        let node = XMLElement(name: name, stringValue: text)
        if let type { node.addAttribute(attribute("type", type)) }
        return node
    }

    func attribute(_ name: String, _ value: String) -> XMLNode {
        XMLNode.attribute(withName: name, stringValue: value) as! XMLNode
    }

    func namespace(_ prefix: String, _ uri: String) -> XMLNode {
        XMLNode.namespace(withName: prefix, stringValue: uri) as! XMLNode
    }

    func xml(_ rootElement: XMLElement, type: String) -> LocalReadResponse {
        let document = XMLDocument(rootElement: rootElement)
        document.version = "1.0"
        document.characterEncoding = "utf-8"
        return LocalReadResponse(status: 200, contentType: type, body: [UInt8](document.xmlData(options: [])))
    }
}
