import Foundation

/// The OData test fixtures: CSDL (V4) and EDMX (V2) documents of small services, shared by the unit
/// tests of the OData modules. The documents are resources of this target (`Resources/OData/NAME.xml`).
public enum ODataFixtures {
    /// V4: `Customers` and `Orders` (`Order.Customer` with a referential constraint on `CustomerID`, `Freight` Decimal), partners both ways.
    public static var customersOrdersV4: String { document("customersOrdersV4") }

    /// The same as ``customersOrdersV4`` in V2 (an association with a referential constraint).
    public static var customersOrdersV2: String { document("customersOrdersV2") }

    /// V4: one entity set `Products` (`ID` Int32 key, `Name`).
    public static var productsV4: String { document("productsV4") }

    /// V4: `Customers` and `Orders` whose navigations have no referential constraint (answered through link tables).
    public static var customersOrdersWithoutConstraintV4: String {
        document("customersOrdersWithoutConstraintV4")
    }

    /// V2: `HeaderSet` → `ItemSet` (`ToItems`, composite item key `Id`,`Pos`) through an association without a referential constraint.
    public static var headersItemsWithoutConstraintV2: String { document("headersItemsWithoutConstraintV2") }

    /// V4: `Customers`, `Orders` (Int64 key, Decimal, DateTimeOffset, `Customer` with a referential constraint) and `Lines` (composite key).
    public static var customersOrdersLinesV4: String { document("customersOrdersLinesV4") }

    /// V2: `Orders` (Decimal, DateTime) with `Items` (composite key) through a referential constraint, and a function import `Confirm` (POST).
    public static var ordersItemsWithFunctionV2: String { document("ordersItemsWithFunctionV2") }

    /// V4: `Products` (`ID` Int32 key, `Name`, `Price` Decimal) and `Notes` (`Code` String key, `Text`).
    public static var productsNotesV4: String { document("productsNotesV4") }

    /// V4, the examples of SAP's offline store (seed `002_…`): `Customers` (String key) whose `Orders` (Int32
    /// key, `CustomerID` foreign key) are deleted with them (`OnDelete Cascade`), `Products` (Int32 key), and
    /// `Motherboards` whose `CPUs` (`MotherboardID` foreign key) are deleted with them (`OnDelete Cascade`).
    public static var offlineStoreV4: String { document("offlineStoreV4") }

    /// V4 `Shop.Model` (ODataCore's issue-15 model): inheritance (`People` of `Person`, `Employee`,
    /// `Customer`; abstract `Document`), singleton `Company`, containment `Orders/Lines`, enums (flags),
    /// complex and collection properties, every primitive type.
    public static var shopV4: String { document("shopV4") }

    /// The fixture document `Resources/OData/<name>.xml`; traps when it is missing (a broken test target).
    public static func document(_ name: String) -> String {
        guard let url = Bundle.module.url(forResource: name, withExtension: "xml", subdirectory: "OData"),
            let text = try? String(contentsOf: url, encoding: .utf8)
        else { preconditionFailure("no OData fixture \(name).xml in MirrorgateTesting's resources") }
        return text
    }
}
