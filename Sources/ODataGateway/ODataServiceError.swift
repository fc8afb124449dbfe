import HTTPCore
import JSONCore
import ODataCore
import Storage

/// OData version of a service (ODataCore's), re-exported for the assembly.
public typealias ODataVersion = ODataCore.ODataVersion

/// An OData error answered to a client: an HTTP status, an OData error code and a message, rendered in
/// the JSON format of the service's version with its version header (V4 `{"error":{"code","message"}}`,
/// V2 `{"error":{"code","message":{"lang","value"}}}`).
///
/// Every part of a service that answers locally throws it; the part that writes the answer renders it
/// with the service's version (``response(version:)``). Promises: a failure never reaches a client as
/// anything but such a body.
public struct ODataServiceError: GatewayError, Sendable, CustomStringConvertible {
    /// The HTTP status.
    public var status: Int
    /// The OData error code.
    public var code: String
    /// The message for the client.
    public var message: String
    /// The version whose format ``response()`` takes.
    public var version: ODataVersion
    /// The part of the request the error is about (a property path such as `UnitPrice`): V4's `target`.
    public var target: String?

    /// An error with its status, code and message (rendered as V4 unless `version` says otherwise).
    public init(
        _ status: Int, _ code: String, _ message: String, version: ODataVersion = .v4, target: String? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.version = version
        self.target = target
    }

    /// A payload the model refuses: `400 BadRequest` with the property as `target`.
    init(payload violation: ODataPayloadViolation) {
        self.init(400, "BadRequest", violation.message, target: violation.target)
    }

    /// `status code: message`.
    public var description: String { "\(status) \(code): \(message)" }

    /// The error as a response in ``version``'s format.
    public func response() -> HTTPResponse { response(version: version) }

    /// The error as a response in `version`'s format.
    public func response(version: ODataVersion) -> HTTPResponse {
        Self.response(status, code: code, message, version: version, target: target)
    }

    /// The response for an error: the body in `version`'s format, ``ODataVersionHeaders`` for errors;
    /// V4 bodies name `target` when given.
    public static func response(
        _ status: Int, code: String, _ message: String, version: ODataVersion, target: String? = nil
    ) -> HTTPResponse {
        let body: String
        switch version {
        case .v4:
            let targetMember = target.map { #","target":"# + JSON.string($0).serialized() } ?? ""
            body =
                #"{"error":{"code":\#(JSON.string(code).serialized()),"message":\#(JSON.string(message).serialized())\#(targetMember)}}"#
        case .v2:
            body =
                #"{"error":{"code":\#(JSON.string(code).serialized()),"message":{"lang":"en","value":\#(JSON.string(message).serialized())}}}"#
        }
        var r = HTTPResponse.json(status, body)
        ODataVersionHeaders.set(&r.headers, version: version, for: .error)
        return r
    }

    /// A parser or translator error of ODataCore: what the gateway does not implement is 501, the rest 400.
    init(_ e: ODataCore.ODataError) {
        self.init(
            e.isNotImplemented ? 501 : 400, e.isNotImplemented ? "NotImplemented" : "BadRequest", e.message)
    }

    /// A failure of SQLite while answering a read: a statement beyond SQLite's limits (a `$filter` with
    /// lambdas nested a few levels deep overflows its parser stack; a huge expression tree, too many terms
    /// or variables, too big a value) is a valid query not answered locally (501); anything else is 500.
    init(sqlFailure error: any Error) {
        if let e = error as? SQLiteError, Self.beyondLimits(e) {
            self.init(
                501, "NotImplemented",
                "the query is too complex to be answered locally (\(e.message))")
        } else {
            self.init(500, "InternalError", "local read failed: \(error)")
        }
    }

    static func beyondLimits(_ e: SQLiteError) -> Bool {
        if e.code == 18 { return true }  // SQLITE_TOOBIG
        let m = e.message.lowercased()
        return m.contains("parser stack overflow") || m.contains("expression tree is too large")
            || m.hasPrefix("too many ") || m.contains("pattern too complex")
    }
}

/// The one place that decides which OData version headers a message carries.
///
/// Responses follow the upstream conventions (see `reference/odata.md` §2.1): V4 answers carry
/// `OData-Version: 4.0` (the gateway serializes 4.0 payloads only). V2 answers carry `DataServiceVersion`
/// as SAP Gateway and the MS-ODATA rules set it: `2.0` for payloads (entities and feeds use V2 features
/// such as `__count`, `__next` and `$select`; `$metadata` declares `m:DataServiceVersion="2.0"`;
/// `$batch` answers), `1.0` for answers whose format is V1's (error bodies and empty `204` answers).
///
/// Requests to the upstream: downloads ask V4-or-unknown services for 4.0 JSON (`OData-MaxVersion: 4.0`);
/// uploads name the service's version (`OData-Version`/`OData-MaxVersion: 4.0`, or a V2 `$batch`'s
/// `DataServiceVersion: 2.0`).
public enum ODataVersionHeaders {
    /// What a response carries.
    public enum Payload: Sendable {
        /// Entities, feeds, properties, counts, service documents, `$metadata`, `$batch` answers.
        case data
        /// No body (`204` after an update, delete or link change).
        case empty
        /// An OData error body.
        case error
    }

    /// Sets the version header of a response of `kind` in `version`.
    public static func set(_ headers: inout HTTPHeaders, version: ODataVersion, for kind: Payload) {
        switch (version, kind) {
        case (.v4, _): headers.set("OData-Version", "4.0")
        case (.v2, .data): headers.set("DataServiceVersion", "2.0")
        case (.v2, .empty), (.v2, .error): headers.set("DataServiceVersion", "1.0")
        }
    }

    /// The headers of a response of `kind` in `version`.
    static func response(_ version: ODataVersion, for kind: Payload) -> HTTPHeaders {
        var h = HTTPHeaders()
        set(&h, version: version, for: kind)
        return h
    }

    /// The version headers of an uploaded request (`batch`: a multipart `$batch`).
    static func upload(_ version: ODataVersion, batch: Bool) -> [(name: String, value: String)] {
        switch version {
        case .v4: return [("OData-Version", "4.0"), ("OData-MaxVersion", "4.0")]
        case .v2: return batch ? [("DataServiceVersion", "2.0")] : []
        }
    }

    /// The version headers of a download GET with `accept` (`configured`: the configured version, nil
    /// while it is detected): data in 4.0 JSON unless the service is known to be V2; `$metadata` as the
    /// upstream serves it by default.
    static func download(configured: ODataVersion?, accept: String) -> [(name: String, value: String)] {
        configured != .v2 && accept == "application/json" ? [("OData-MaxVersion", "4.0")] : []
    }
}
