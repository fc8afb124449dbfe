import JSONCore
import Testing

@testable import SearchEngine

/// Algolia's partial updates and built-in operations (``PartialUpdate``).
@Suite struct PartialUpdateTests {
    func apply(_ body: JSONObject, _ record: JSON?) throws -> PartialUpdate.Outcome {
        try PartialUpdate.apply(body, to: record, objectID: "r")
    }

    func op(_ name: String, _ value: JSON) -> JSON { ["_operation": .string(name), "value": value] }

    @Test func attributesReplaceFirstLevelValues() throws {
        let record: JSON = ["objectID": "r", "a": 1, "nested": ["x": 1, "y": 2]]
        #expect(
            try apply(["nested": ["x": 5], "b": "new"], record)
                == .updated(["objectID": "r", "a": 1, "nested": ["x": 5], "b": "new"]))
        #expect(try apply(["a": 2], nil) == .updated(["objectID": "r", "a": 2]))
    }

    @Test func numbersAndArrays() throws {
        let record: JSON = ["objectID": "r", "n": 10, "d": 1.5, "tags": ["a", "b", "a"], "one": "x"]
        guard
            case .updated(let r) = try apply(
                [
                    "n": op("Increment", 5), "d": op("Decrement", 0.5), "m": op("Increment", 2),
                    "tags": op("Remove", "a"),
                    "one": op("Add", "y"), "more": op("AddUnique", 3),
                ], record)
        else {
            Issue.record("not updated")
            return
        }
        #expect(r["n"] == 15 && r["d"] == 1.0 && r["m"] == 2)
        #expect(r["tags"] == ["b"] && r["one"] == ["x", "y"] && r["more"] == [3])
        guard case .updated(let again) = try apply(["more": op("AddUnique", 3), "tags": op("Add", "b")], r)
        else {
            Issue.record("not updated")
            return
        }
        #expect(again["more"] == [3] && again["tags"] == ["b", "b"])
        #expect(try apply(["gone": op("Remove", "z")], record) == .updated(record))
    }

    @Test func conditionalIncrements() throws {
        let record: JSON = ["objectID": "r", "version": 2, "name": "old"]
        #expect(
            try apply(["version": op("IncrementFrom", 2), "name": "new"], record)
                == .updated(["objectID": "r", "version": 3, "name": "new"]))
        #expect(try apply(["version": op("IncrementFrom", 1), "name": "new"], record) == .ignored)
        #expect(
            try apply(["version": op("IncrementSet", 5)], record)
                == .updated(["objectID": "r", "version": 5, "name": "old"]))
        #expect(try apply(["version": op("IncrementSet", 2)], record) == .ignored)
        // A missing record is created only from 0 (IncrementFrom) or above 0 (IncrementSet).
        #expect(try apply(["v": op("IncrementFrom", 0)], nil) == .updated(["objectID": "r", "v": 1]))
        #expect(try apply(["v": op("IncrementFrom", 3)], nil) == .ignored)
        #expect(try apply(["v": op("IncrementSet", 0)], nil) == .ignored)
        #expect(PartialUpdate.isIdempotent(["v": op("IncrementSet", 1), "w": op("AddUnique", 1), "x": 1]))
        #expect(!PartialUpdate.isIdempotent(["v": op("Increment", 1)]))
    }

    @Test(arguments: [
        (["a": ["_operation": "Multiply", "value": 2]] as JSONObject, "unknown _operation"),
        (["n": ["_operation": "Increment", "value": "x"]] as JSONObject, "numeric value"),
        (["s": ["_operation": "Increment", "value": 1]] as JSONObject, "numeric attribute"),
        (["a": ["_operation": "Add", "value": ["x": 1]]] as JSONObject, "string or numeric"),
        (["v": ["_operation": "IncrementFrom", "value": 1.5]] as JSONObject, "integer value"),
    ])
    func badOperationsAre400(body: JSONObject, words: String) {
        do {
            _ = try PartialUpdate.apply(body, to: ["objectID": "r", "s": "text"], objectID: "r")
            Issue.record("expected an error")
        } catch {
            #expect(error.status == 400)
            #expect(error.message.contains(words), "\(error.message)")
        }
    }
}
