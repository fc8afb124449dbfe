/// A protocol-level error found while parsing metadata, literals, paths, query options or `$filter`.
///
/// Promises: `message` is a sentence fit for an OData error response (it names the offending segment,
/// option or property); `offset` is the character offset (Unicode scalars, 0-based) into the decoded text
/// that was being parsed when known; `segment` names the path segment or query option concerned. Every
/// failure of this module's parsers is reported as this error, never as a crash.
public struct ODataError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Which parser produced the error.
    public enum Kind: String, Sendable, Hashable {
        case metadata
        case literal
        case path
        case query
        case filter
        case translation
        /// Valid OData that this module (or the local answer) does not support; a gateway answers 501.
        case notImplemented
    }

    /// True for errors a gateway answers with 501 Not Implemented rather than 400: `.notImplemented`,
    /// and `.translation` (a valid query that cannot be expressed over the local storage).
    public var isNotImplemented: Bool { kind == .notImplemented || kind == .translation }

    public var kind: Kind
    public var message: String
    public var offset: Int?
    public var segment: String?

    public init(_ kind: Kind, _ message: String, offset: Int? = nil, segment: String? = nil) {
        self.kind = kind
        self.message = message
        self.offset = offset
        self.segment = segment
    }

    public var description: String {
        var text = message
        if let offset { text += " (at offset \(offset))" }
        return text
    }
}
