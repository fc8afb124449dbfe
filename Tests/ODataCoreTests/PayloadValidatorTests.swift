import JSONCore
import Testing

@testable import ODataCore

private func members(_ json: String) throws -> [(String, RawJSON)] {
    try #require(try RawJSON.parse(json).members)
}

private let northwind = Result { try CSDLParser.parse(Fixtures.northwindV4) }

/// The violation for `json` as `operation` on `type`, nil when the payload is accepted.
private func violation(
    _ json: String, _ type: String = "NorthwindModel.Product",
    _ operation: ODataPayloadValidator.Operation = .update,
    model: EdmModel? = nil
) throws -> ODataPayloadViolation? {
    let validator = ODataPayloadValidator(model: try model ?? northwind.get())
    let given = try members(json)
    do {
        try validator.validate(given, ofType: type, for: operation)
        return nil
    } catch { return error }
}

@Test func wrongTypesAreRefusedWithTheirProperty() throws {
    // Issue 19 D2's examples: each would have been a 400 upstream.
    #expect(try violation(#"{"UnitPrice":"not-a-number"}"#)?.target == "UnitPrice")
    #expect(try violation(#"{"Discontinued":"maybe"}"#)?.target == "Discontinued")
    #expect(try violation(#"{"Discontinued":1}"#)?.target == "Discontinued")
    #expect(try violation(#"{"UnitPrice":1e309}"#)?.target == "UnitPrice")
    #expect(try violation(#"{"ProductID":"abc"}"#)?.target == "ProductID")
    #expect(try violation(#"{"ProductID":1099511627776}"#)?.message.contains("out of range") == true)
    #expect(try violation(#"{"ProductID":1.5}"#)?.target == "ProductID")
    #expect(try violation(#"{"ProductName":17}"#)?.target == "ProductName")
    #expect(try violation(#"{"Picture":"***"}"#)?.target == "Picture")
    #expect(try violation(#"{"Discontinued":null}"#)?.message.contains("cannot be null") == true)
    #expect(try violation(#"{"Nonsense":1}"#)?.message.contains("does not exist") == true)
    #expect(
        try violation(#"{"ProductName":"a","ProductName":"b"}"#)?.message.contains("more than once") == true)
}

@Test func validValuesOfEveryKindPass() throws {
    #expect(
        try violation(#"{"ProductID":7,"ProductName":"Tea","UnitPrice":"12.5","Discontinued":false}"#) == nil)
    #expect(try violation(#"{"UnitPrice":12.0,"ProductID":3.0,"Picture":"AQID","ProductName":null}"#) == nil)
    let order =
        #"{"OrderID":1,"OrderDate":"2024-05-01T10:00:00Z","ShipDate":"2024-05-02","Freight":"1.2345","#
        + #""Paint":"Red,Blue","TrackingId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","CustomerID":"ALFKI"}"#
    #expect(try violation(order, "NorthwindModel.Order", .create) == nil)
    // Instance annotations and navigation properties are the caller's.
    #expect(
        try violation(
            #"{"@odata.etag":"W/\"1\"","Customer@odata.bind":"Customers('A')"}"#, "NorthwindModel.Order")
            == nil)
}

@Test func temporalEnumGuidComplexAndCollectionValuesAreChecked() throws {
    let order = "NorthwindModel.Order"
    #expect(try violation(#"{"OrderDate":"yesterday"}"#, order)?.target == "OrderDate")
    #expect(try violation(#"{"ShipDate":"2024-13-40"}"#, order)?.target == "ShipDate")
    #expect(try violation(#"{"Paint":"Purple"}"#, order)?.target == "Paint")
    #expect(try violation(#"{"TrackingId":"not-a-guid"}"#, order)?.target == "TrackingId")
    #expect(try violation(#"{"Freight":"1.23456"}"#, order)?.message.contains("Scale=4") == true)
    #expect(try violation(#"{"Freight":123456789012345678}"#, order)?.message.contains("Precision") == true)
    let customer = "NorthwindModel.Customer"
    #expect(try violation(#"{"CustomerID":"TOOLONG"}"#, customer)?.message.contains("MaxLength=5") == true)
    #expect(try violation(#"{"Address":{"City":"Berlin"},"Tags":["a","b"]}"#, customer) == nil)
    #expect(try violation(#"{"Address":{"City":3}}"#, customer)?.target == "Address/City")
    #expect(try violation(#"{"Address":{"Planet":"Mars"}}"#, customer)?.target == "Address/Planet")
    #expect(try violation(#"{"Address":"Berlin"}"#, customer)?.target == "Address")
    #expect(try violation(#"{"Tags":"a"}"#, customer)?.target == "Tags")
    #expect(try violation(#"{"Tags":["a",2]}"#, customer)?.target == "Tags/1")
    #expect(try violation(#"{"Version":"12"}"#, customer) == nil)  // Int64 as a string (IEEE754Compatible)
}

@Test func aCreateNeedsEveryNonNullablePropertyButKeysAndExemptions() throws {
    let product = "NorthwindModel.Product"
    #expect(try violation(#"{"ProductName":"Tea"}"#, product, .create)?.target == "Discontinued")
    #expect(try violation(#"{"ProductName":"Tea"}"#, product, .update) == nil)
    #expect(try violation(#"{"ProductName":"Tea"}"#, product, .replace) == nil)
    // The key is minted by the caller; exempted properties are set by the caller.
    #expect(try violation(#"{"Discontinued":true}"#, product, .create) == nil)
    let validator = ODataPayloadValidator(model: try northwind.get())
    try validator.validate(
        try members(#"{"ProductName":"Tea"}"#), ofType: product, for: .create, exempt: ["Discontinued"])
    // Inherited properties count; a derived type's own properties exist only on it.
    #expect(try violation(#"{"Priority":1}"#, "NorthwindModel.Order")?.target == "Priority")
    #expect(try violation(#"{"Priority":1,"OrderDate":null}"#, "NorthwindModel.SpecialOrder") == nil)
    #expect(try violation(#"{"Priority":40000}"#, "NorthwindModel.SpecialOrder")?.target == "Priority")
}

@Test func declaredTypesMustBeTheBaseOrDerived() throws {
    let validator = ODataPayloadValidator(model: try northwind.get())
    let order = "NorthwindModel.Order"
    #expect(
        try validator.declaredType(of: members(##"{"@odata.type":"#NW.SpecialOrder"}"##), base: order)
            == "NorthwindModel.SpecialOrder")
    #expect(try validator.declaredType(of: members(#"{"a":1}"#), base: order) == order)
    #expect(throws: ODataPayloadViolation.self) {
        try validator.declaredType(of: members(##"{"@odata.type":"#NorthwindModel.Product"}"##), base: order)
    }
    #expect(throws: ODataPayloadViolation.self) {
        try validator.declaredType(of: members(##"{"@odata.type":"#Nowhere.T"}"##), base: order)
    }
}

@Test func openTypesTakeUnknownPropertiesAndEnumsByName() throws {
    let trip = try CSDLParser.parse(Fixtures.tripPin)
    let person = "Trippin.Person"
    #expect(
        try violation(#"{"UserName":"u","Gender":"Female","Anything":[1]}"#, person, .create, model: trip)
            == nil)
    #expect(try violation(#"{"UserName":"u"}"#, person, .create, model: trip)?.target == "Gender")
    #expect(try violation(#"{"Gender":"Robot"}"#, person, model: trip)?.target == "Gender")
    #expect(
        try violation(#"{"AddressInfo":[{"Address":"x"},{"Address":1}]}"#, person, model: trip)?.target
            == "AddressInfo/1/Address")
}

@Test func wireFormsFollowTheVersion() {
    // V2 verbose JSON writes every number as a string; V4 only Int64 and Decimal (and INF/NaN).
    #expect(ODataPayloadValidator.problem(with: .string("5"), as: .int32, version: .v2) == nil)
    #expect(ODataPayloadValidator.problem(with: .string("5"), as: .int32, version: .v4) != nil)
    #expect(ODataPayloadValidator.problem(with: .string("true"), as: .boolean, version: .v2) == nil)
    #expect(ODataPayloadValidator.problem(with: .string("true"), as: .boolean, version: .v4) != nil)
    #expect(ODataPayloadValidator.problem(with: .string("INF"), as: .double, version: .v4) == nil)
    #expect(ODataPayloadValidator.problem(with: .string("1.5"), as: .double, version: .v4) != nil)
    #expect(ODataPayloadValidator.problem(with: .string("1.5"), as: .double, version: .v2) == nil)
    #expect(ODataPayloadValidator.problem(with: .number("3.5e38"), as: .single, version: .v4) != nil)
    #expect(ODataPayloadValidator.problem(with: .number("3.4e38"), as: .single, version: .v4) == nil)
    #expect(ODataPayloadValidator.problem(with: .number("256"), as: .byte, version: .v4) != nil)
    #expect(ODataPayloadValidator.problem(with: .number("-129"), as: .sbyte, version: .v4) != nil)
    #expect(
        ODataPayloadValidator.problem(with: .number("9223372036854775808"), as: .int64, version: .v4) != nil)
    #expect(
        ODataPayloadValidator.problem(with: .string("/Date(1754611200000)/"), as: .dateTime, version: .v2)
            == nil)
    #expect(ODataPayloadValidator.problem(with: .string("PT1H30M"), as: .duration, version: .v4) == nil)
    #expect(ODataPayloadValidator.problem(with: .string("1h"), as: .duration, version: .v4) != nil)
    #expect(ODataPayloadValidator.problem(with: .number("1e40"), as: .decimal, version: .v4) != nil)
}

/// A V4 model in SAP A2X's style: a non-nullable collection of messages on the entity type, and the Core
/// vocabulary's `Computed` and `Immutable` terms inline and out of line.
private let a2x = Result {
    try CSDLParser.parse(
        """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
        <edmx:Reference Uri="https://oasis-tcs.github.io/odata-vocabularies/vocabularies/Org.OData.Core.V1.xml">
        <edmx:Include Namespace="Org.OData.Core.V1" Alias="Core"/></edmx:Reference>
        <edmx:DataServices><Schema Namespace="S" xmlns="http://docs.oasis-open.org/odata/ns/edm">
        <ComplexType Name="Message"><Property Name="code" Type="Edm.String"/></ComplexType>
        <EntityType Name="Order"><Key><PropertyRef Name="ID"/></Key>
        <Property Name="ID" Type="Edm.String" Nullable="false"/>
        <Property Name="Kind" Type="Edm.String" Nullable="false"/>
        <Property Name="Created" Type="Edm.DateTimeOffset" Nullable="false">
          <Annotation Term="Core.Computed" Bool="true"/></Property>
        <Property Name="Changed" Type="Edm.DateTimeOffset" Nullable="false"/>
        <Property Name="Owner" Type="Edm.String" Nullable="false">
          <Annotation Term="Org.OData.Core.V1.Immutable"/></Property>
        <Property Name="Shown" Type="Edm.String" Nullable="false">
          <Annotation Term="Core.Computed" Bool="false"/></Property>
        <Property Name="SAP__Messages" Type="Collection(S.Message)" Nullable="false"/>
        </EntityType>
        <EntityContainer Name="C"><EntitySet Name="Orders" EntityType="S.Order"/></EntityContainer>
        <Annotations Target="S.Order/Changed"><Annotation Term="Core.Computed"/></Annotations>
        </Schema></edmx:DataServices></edmx:Edmx>
        """)
}

@Test func protocolDefaultsOfACreateAreNotRequired() throws {
    let model = try a2x.get()
    let order = "S.Order"
    let props = Dictionary(uniqueKeysWithValues: model.properties(of: order).map { ($0.name, $0) })
    #expect(props["Created"]?.isComputed == true && props["Changed"]?.isComputed == true)
    #expect(props["Owner"]?.isImmutable == true && props["Owner"]?.isComputed == false)
    #expect(props["Shown"]?.isComputed == false)
    // OData 4.01 §11.4.2: an omitted collection is an empty one; computed properties are the service's.
    #expect(try violation(#"{"Kind":"OR","Owner":"me","Shown":"x"}"#, order, .create, model: model) == nil)
    #expect(
        try violation(
            #"{"Kind":"OR","Owner":"me","Shown":"x","SAP__Messages":[]}"#, order, .create, model: model)
            == nil)
    // A non-nullable single value without a default is still required; a collection given is checked.
    #expect(try violation(#"{"Owner":"me","Shown":"x"}"#, order, .create, model: model)?.target == "Kind")
    #expect(try violation(#"{"Kind":"OR","Shown":"x"}"#, order, .create, model: model)?.target == "Owner")
    #expect(
        try violation(
            #"{"Kind":"OR","Owner":"me","Shown":"x","SAP__Messages":7}"#, order, .create, model: model)?
            .target == "SAP__Messages")
    // Values the service ignores: null is not refused; another value is still typed.
    #expect(
        try violation(#"{"Kind":"OR","Owner":"me","Shown":"x","Created":null}"#, order, .create, model: model)
            == nil)
    #expect(
        try violation(#"{"Created":"yesterday"}"#, order, .update, model: model)?.target == "Created")
    #expect(try violation(#"{"Owner":null}"#, order, .update, model: model) == nil)
    #expect(try violation(#"{"Owner":null}"#, order, .create, model: model)?.target == "Owner")
    #expect(try violation(#"{"Kind":null}"#, order, .update, model: model)?.target == "Kind")
}
