import JSONCore
import Testing

@testable import ODataCore

/// `ODataOpenAPI`: OASIS's CSDL-to-OpenAPI mapping over the model.
@Suite struct OpenAPITests {
    func doc(_ model: EdmModel) -> JSON {
        ODataOpenAPI.document(model: model, serviceRoot: "http://127.0.0.1:8080/odata/nw/", title: "nw")
    }

    @Test func v4PathsOperationsAndParametersFollowTheMapping() throws {
        let d = doc(Fixtures.northwindV4Model)
        #expect(d["openapi"]?.stringValue == "3.0.2")
        #expect(d["servers"]?[0]?["url"]?.stringValue == "http://127.0.0.1:8080/odata/nw/")
        let paths = try #require(d["paths"]?.objectValue)
        let customers = try #require(paths["/Customers"])
        #expect(customers["get"] != nil && customers["post"] != nil)
        let names = (customers["get"]?["parameters"]?.arrayValue ?? []).map {
            $0["name"]?.stringValue ?? $0["$ref"]?.stringValue ?? ""
        }
        #expect(
            names.contains("#/components/parameters/top") && names.contains("#/components/parameters/count"))
        #expect(names.contains("$select") && names.contains("$orderby") && names.contains("$expand"))
        let byKey = try #require(paths["/Customers('{CustomerID}')"])
        #expect(byKey["get"] != nil && byKey["patch"] != nil && byKey["delete"] != nil)
        #expect(paths["/Customers('{CustomerID}')/Orders"]?["get"] != nil)
        #expect(paths["/$batch"]?["post"] != nil)
        let schema = customers["get"]?["responses"]?["200"]?["content"]?["application/json"]?["schema"]
        #expect(
            schema?["properties"]?["value"]?["items"]?["$ref"]?.stringValue
                == "#/components/schemas/NorthwindModel.Customer")
        #expect(
            customers["post"]?["requestBody"]?["content"]?["application/json"]?["schema"]?["$ref"]?
                .stringValue
                == "#/components/schemas/NorthwindModel.Customer-create")
    }

    @Test func v4SchemasMapPrimitiveTypesEnumsAndVariants() throws {
        let schemas = try #require(doc(Fixtures.northwindV4Model)["components"]?["schemas"]?.objectValue)
        let customer = try #require(schemas["NorthwindModel.Customer"]?["properties"])
        #expect(customer["CustomerID"]?["type"]?.stringValue == "string")
        #expect(customer["CustomerID"]?["maxLength"]?.intValue == 5)
        #expect(customer["City"]?["nullable"]?.boolValue == true)
        #expect(customer["Tags"]?["type"]?.stringValue == "array")
        #expect(customer["Version"]?["allOf"] != nil || customer["Version"]?["anyOf"] != nil)
        #expect(
            customer["Orders"]?["items"]?["$ref"]?.stringValue == "#/components/schemas/NorthwindModel.Order")
        let update = try #require(schemas["NorthwindModel.Customer-update"]?["properties"])
        #expect(update["CustomerID"] == nil, "keys are not updated")
        #expect(update["Orders"] == nil, "no navigation in updates")
        #expect(schemas["NorthwindModel.Color"]?["enum"]?.arrayValue?.count == 3)
        #expect(schemas["NorthwindModel.Address"] != nil)
        #expect(doc(Fixtures.northwindV4Model)["components"]?["responses"]?["error"] != nil)
    }

    @Test func everyReferenceResolves() throws {
        for model in [
            Fixtures.northwindV4Model, Fixtures.tripPinModel, Fixtures.northwindV2Model, Fixtures.sapV2Model,
        ] {
            let d = doc(model)
            var refs: [String] = []
            func walk(_ j: JSON) {
                if let o = j.objectValue {
                    for (k, v) in o {
                        if k == "$ref", let s = v.stringValue { refs.append(s) } else { walk(v) }
                    }
                } else if let a = j.arrayValue {
                    a.forEach(walk)
                }
            }
            walk(d)
            #expect(!refs.isEmpty)
            for r in refs {
                let parts = r.split(separator: "/").dropFirst().map(String.init)
                var at: JSON? = d
                for p in parts { at = at?[p] }
                #expect(at != nil, "unresolved \(r)")
            }
        }
    }

    @Test func v2PayloadsAndOptions() throws {
        let d = doc(Fixtures.northwindV2Model)
        let paths = try #require(d["paths"]?.objectValue)
        let (path, item) = try #require(paths.first { $0.key.hasPrefix("/Customers") && $0.key.count > 10 })
        #expect(path.contains("'{CustomerID}'"))
        #expect(
            item["get"]?["responses"]?["200"]?["content"]?["application/json"]?["schema"]?["properties"]?["d"]
                != nil)
        let list = try #require(paths["/Customers"]?["get"]?["parameters"]?.arrayValue)
        let refs = list.compactMap { $0["$ref"]?.stringValue }
        #expect(
            refs.contains("#/components/parameters/inlinecount")
                && !refs.contains("#/components/parameters/search"))
        #expect(d["components"]?["parameters"]?["search"] == nil)
    }

    @Test func sameModelSameDocument() {
        #expect(doc(Fixtures.sapV2Model).serialized() == doc(Fixtures.sapV2Model).serialized())
    }
}
