internal import CLibXML2

/// The one parser of XML input (Atom request bodies, `$metadata` documents): libxml2's streaming reader
/// with network access, DTD loading and entity substitution off, and explicit bounds, building a small
/// element tree. No XML reaches any other parser.
///
/// Promises: a document that is empty, not well-formed, declares a DTD (`<!DOCTYPE`, so no entity can
/// be declared or expanded), is not in UTF-8 or an ASCII-compatible declared encoding, or exceeds a bound
/// of ``Limits`` throws ``SafeXMLError``; nothing is fetched, nothing is printed, the process never aborts.
/// Parsing allocates in proportion to the input (bounded by ``Limits/maxBytes``) and recurses nowhere.
public enum SafeXML {
    /// Bounds on one document; each passed throws ``SafeXMLError``.
    public struct Limits: Sendable, Hashable {
        /// The largest document, in bytes.
        public var maxBytes: Int
        /// The deepest element nesting (the root is at depth 1).
        public var maxDepth: Int
        /// The most elements in one document.
        public var maxElements: Int
        /// The longest attribute value, in bytes.
        public var maxAttributeBytes: Int

        /// Bounds from the given values.
        public init(maxBytes: Int, maxDepth: Int, maxElements: Int, maxAttributeBytes: Int) {
            self.maxBytes = maxBytes
            self.maxDepth = maxDepth
            self.maxElements = maxElements
            self.maxAttributeBytes = maxAttributeBytes
        }

        /// For request bodies (Atom entries): 16 MiB, 64 levels, 200 000 elements, 64 KiB attributes.
        public static let requestBody = Limits(
            maxBytes: 16 << 20, maxDepth: 64, maxElements: 200_000, maxAttributeBytes: 64 << 10)
        /// For `$metadata` documents: 128 MiB, 128 levels, 4 000 000 elements, 1 MiB attributes.
        public static let metadata = Limits(
            maxBytes: 128 << 20, maxDepth: 128, maxElements: 4_000_000, maxAttributeBytes: 1 << 20)
    }

    /// An element: its qualified name, namespace URI, attributes (by qualified name, namespace
    /// declarations included), child elements and text (its text and CDATA children, concatenated).
    public struct Element: Sendable, Hashable {
        /// The qualified name as written (`edmx:Edmx`).
        public var name: String
        /// The name without its prefix (`Edmx`).
        public var local: String
        /// The element's namespace URI, empty when it has none.
        public var namespaceURI: String
        /// The attributes by qualified name (`m:null`, `xmlns:d`).
        public var attributes: [String: String]
        /// The child elements in document order.
        public var children: [Element]
        /// The element's own character data (text, CDATA and whitespace children), concatenated.
        public var text: String

        /// An element from its parts.
        public init(
            name: String, local: String? = nil, namespaceURI: String = "", attributes: [String: String] = [:],
            children: [Element] = [], text: String = ""
        ) {
            self.name = name
            self.local = local ?? name.split(separator: ":", maxSplits: 1).last.map(String.init) ?? name
            self.namespaceURI = namespaceURI
            self.attributes = attributes
            self.children = children
            self.text = text
        }

        /// An attribute by local name, with or without a prefix (`m:HttpMethod` matches `HttpMethod`);
        /// the unprefixed one wins.
        public func attribute(local: String) -> String? {
            if let value = attributes[local] { return value }
            for (key, value) in attributes where key.hasSuffix(":" + local) { return value }
            return nil
        }

        /// The child elements whose local name is `local`.
        public func children(local: String) -> [Element] { children.filter { $0.local == local } }
    }

    /// libxml2's global state is set up once, before the first parse on any thread.
    private static let initialized: Bool = {
        xmlInitParser()
        return true
    }()

    /// Parses `bytes` into the root element, within `limits`.
    public static func parse(_ bytes: [UInt8], limits: Limits) throws(SafeXMLError) -> Element {
        try bytes.withUnsafeBufferPointer { (buffer) throws(SafeXMLError) -> Element in
            try parse(buffer, limits: limits)
        }
    }

    /// Parses a buffer into the root element, within `limits`.
    public static func parse(_ buffer: UnsafeBufferPointer<UInt8>, limits: Limits) throws(SafeXMLError)
        -> Element
    {
        try precheck(buffer, limits: limits)
        _ = initialized
        mg_xml_quiet()
        guard
            let reader = buffer.withMemoryRebound(
                to: CChar.self,
                { xmlReaderForMemory($0.baseAddress, Int32(buffer.count), nil, nil, mg_xml_safe_options()) })
        else { throw SafeXMLError("the XML parser could not be started") }
        defer { xmlFreeTextReader(reader) }
        var builder = TreeBuilder(limits: limits)
        while true {
            let status = xmlTextReaderRead(reader)
            if status == 0 { break }
            guard status == 1 else { throw failure(reader) }
            try builder.take(reader)
        }
        guard let root = builder.root else { throw SafeXMLError("the document has no root element") }
        return root
    }

    /// What can be refused before libxml2 sees the bytes: the size, emptiness, encodings other than UTF-8
    /// or an ASCII-compatible one (so the DTD scan below sees every declaration), and DTDs.
    private static func precheck(_ buffer: UnsafeBufferPointer<UInt8>, limits: Limits) throws(SafeXMLError) {
        guard buffer.count <= limits.maxBytes else {
            throw SafeXMLError("the XML document is larger than \(limits.maxBytes) bytes")
        }
        var start = 0
        if buffer.count >= 3, buffer[0] == 0xEF, buffer[1] == 0xBB, buffer[2] == 0xBF { start = 3 }
        while start < buffer.count, [0x20, 0x09, 0x0A, 0x0D].contains(buffer[start]) { start += 1 }
        guard start < buffer.count else { throw SafeXMLError("the XML document is empty") }
        guard buffer[start] == UInt8(ascii: "<") else {
            throw SafeXMLError("the document is not XML in UTF-8 (or an ASCII-compatible declared encoding)")
        }
        if contains(buffer, "<!DOCTYPE") || contains(buffer, "<!ENTITY") {
            throw SafeXMLError("the XML document declares a DTD, which is not accepted")
        }
    }

    private static func contains(_ buffer: UnsafeBufferPointer<UInt8>, _ needle: StaticString) -> Bool {
        let count = needle.utf8CodeUnitCount
        guard buffer.count >= count else { return false }
        let first = needle.utf8Start[0]
        var i = 0
        while i + count <= buffer.count {
            if buffer[i] == first {
                var j = 1
                while j < count, buffer[i + j] == needle.utf8Start[j] { j += 1 }
                if j == count { return true }
            }
            i += 1
        }
        return false
    }

    /// The error libxml2 reported for the failed read, with its line.
    private static func failure(_ reader: xmlTextReaderPtr) -> SafeXMLError {
        let line = Int(xmlTextReaderGetParserLineNumber(reader))
        var reason = "not well-formed"
        if let error = xmlGetLastError(), let message = error.pointee.message {
            reason = String(String(cString: message).filter { $0 != "\n" && $0 != "\r" })
        }
        xmlResetLastError()
        return SafeXMLError("the XML document is not well-formed (line \(line)): \(reason)", line: line)
    }

    /// Builds the tree from the reader's nodes with an explicit stack.
    private struct TreeBuilder {
        let limits: Limits
        var stack: [Element] = []
        var root: Element?
        var elements = 0

        mutating func take(_ reader: xmlTextReaderPtr) throws(SafeXMLError) {
            switch Int(xmlTextReaderNodeType(reader)) {
            case Int(XML_READER_TYPE_ELEMENT.rawValue):
                try open(reader)
                if xmlTextReaderIsEmptyElement(reader) == 1 { close() }
            case Int(XML_READER_TYPE_END_ELEMENT.rawValue):
                close()
            case Int(XML_READER_TYPE_TEXT.rawValue), Int(XML_READER_TYPE_CDATA.rawValue),
                Int(XML_READER_TYPE_WHITESPACE.rawValue),
                Int(XML_READER_TYPE_SIGNIFICANT_WHITESPACE.rawValue):
                guard !stack.isEmpty, let value = xmlTextReaderConstValue(reader) else { return }
                stack[stack.count - 1].text += string(value)
            case Int(XML_READER_TYPE_DOCUMENT_TYPE.rawValue), Int(XML_READER_TYPE_ENTITY_REFERENCE.rawValue),
                Int(XML_READER_TYPE_ENTITY.rawValue):
                throw SafeXMLError("the XML document declares or references entities, which is not accepted")
            default:
                return  // comments, processing instructions, the XML declaration
            }
        }

        mutating func open(_ reader: xmlTextReaderPtr) throws(SafeXMLError) {
            guard root == nil else { throw SafeXMLError("the XML document has more than one root element") }
            elements += 1
            guard elements <= limits.maxElements else {
                throw SafeXMLError("the XML document has more than \(limits.maxElements) elements")
            }
            guard stack.count < limits.maxDepth else {
                throw SafeXMLError("the XML document is nested more than \(limits.maxDepth) levels deep")
            }
            var element = Element(
                name: string(xmlTextReaderConstName(reader)),
                local: string(xmlTextReaderConstLocalName(reader)),
                namespaceURI: string(xmlTextReaderConstNamespaceUri(reader)))
            if xmlTextReaderHasAttributes(reader) == 1 {
                while xmlTextReaderMoveToNextAttribute(reader) == 1 {
                    guard let raw = xmlTextReaderConstValue(reader) else { continue }
                    let length = Int(xmlStrlen(raw))
                    guard length <= limits.maxAttributeBytes else {
                        throw SafeXMLError(
                            "an XML attribute value is longer than \(limits.maxAttributeBytes) bytes")
                    }
                    element.attributes[string(xmlTextReaderConstName(reader))] = string(raw)
                }
                xmlTextReaderMoveToElement(reader)
            }
            stack.append(element)
        }

        mutating func close() {
            guard let element = stack.popLast() else { return }
            if stack.isEmpty {
                root = element
            } else {
                stack[stack.count - 1].children.append(element)
            }
        }

        func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
            guard let pointer else { return "" }
            return String(cString: pointer)
        }
    }
}

/// Why an XML document was refused: not well-formed, a DTD, an encoding, or a bound of
/// ``SafeXML/Limits``.
public struct SafeXMLError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong, for the client.
    public var message: String
    /// The line libxml2 stopped at, when it reported one.
    public var line: Int?

    /// An error with its message.
    public init(_ message: String, line: Int? = nil) {
        self.message = message
        self.line = line
    }

    public var description: String { message }
}
