import Foundation

/// The OData test fixtures: CSDL and EDMX documents of small services, in V4 and V2, shared by the
/// unit tests of the OData modules.
public enum ODataFixtures {
    /// V4: `Customers` and `Orders` (`Order.Customer` with a referential constraint on `CustomerID`, `Freight` Decimal), partners both ways.
    public static let customersOrdersV4 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="S" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Customer">
                <Key><PropertyRef Name="CustomerID"/></Key>
                <Property Name="CustomerID" Type="Edm.String" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
                <NavigationProperty Name="Orders" Type="Collection(S.Order)" Partner="Customer"/>
              </EntityType>
              <EntityType Name="Order">
                <Key><PropertyRef Name="OrderID"/></Key>
                <Property Name="OrderID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="CustomerID" Type="Edm.String"/>
                <Property Name="Freight" Type="Edm.Decimal" Scale="2"/>
                <NavigationProperty Name="Customer" Type="S.Customer" Partner="Orders">
                  <ReferentialConstraint Property="CustomerID" ReferencedProperty="CustomerID"/>
                </NavigationProperty>
              </EntityType>
              <EntityContainer Name="C">
                <EntitySet Name="Customers" EntityType="S.Customer">
                  <NavigationPropertyBinding Path="Orders" Target="Orders"/>
                </EntitySet>
                <EntitySet Name="Orders" EntityType="S.Order">
                  <NavigationPropertyBinding Path="Customer" Target="Customers"/>
                </EntitySet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// The same as ``customersOrdersV4`` in V2 (an association with a referential constraint).
    public static let customersOrdersV2 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/ODataFixtures.customersOrdersV4">
          <edmx:DataServices m:DataServiceVersion="2.0">
            <Schema Namespace="S" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="Customer">
                <Key><PropertyRef Name="CustomerID"/></Key>
                <Property Name="CustomerID" Type="Edm.String" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
                <NavigationProperty Name="Orders" Relationship="S.CustomerOrders" FromRole="C" ToRole="O"/>
              </EntityType>
              <EntityType Name="Order">
                <Key><PropertyRef Name="OrderID"/></Key>
                <Property Name="OrderID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="CustomerID" Type="Edm.String"/>
                <Property Name="Freight" Type="Edm.Decimal" Precision="10" Scale="2"/>
                <NavigationProperty Name="Customer" Relationship="S.CustomerOrders" FromRole="O" ToRole="C"/>
              </EntityType>
              <Association Name="CustomerOrders">
                <End Type="S.Customer" Multiplicity="0..1" Role="C"/>
                <End Type="S.Order" Multiplicity="*" Role="O"/>
                <ReferentialConstraint>
                  <Principal Role="C"><PropertyRef Name="CustomerID"/></Principal>
                  <Dependent Role="O"><PropertyRef Name="CustomerID"/></Dependent>
                </ReferentialConstraint>
              </Association>
              <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
                <EntitySet Name="Customers" EntityType="S.Customer"/>
                <EntitySet Name="Orders" EntityType="S.Order"/>
                <AssociationSet Name="CustomerOrdersSet" Association="S.CustomerOrders">
                  <End EntitySet="Customers" Role="C"/>
                  <End EntitySet="Orders" Role="O"/>
                </AssociationSet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// V4: one entity set `Products` (`ID` Int32 key, `Name`).
    public static let productsV4 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="S" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Product">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
              </EntityType>
              <EntityContainer Name="C">
                <EntitySet Name="Products" EntityType="S.Product"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// V4: `Customers` and `Orders` whose navigations have no referential constraint (answered through link tables).
    public static let customersOrdersWithoutConstraintV4 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="NS" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Customer">
                <Key><PropertyRef Name="CustomerID"/></Key>
                <Property Name="CustomerID" Type="Edm.String" Nullable="false"/>
                <Property Name="Country" Type="Edm.String"/>
                <NavigationProperty Name="Orders" Type="Collection(NS.Order)" Partner="Customer"/>
              </EntityType>
              <EntityType Name="Order">
                <Key><PropertyRef Name="OrderID"/></Key>
                <Property Name="OrderID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Freight" Type="Edm.Decimal" Scale="4"/>
                <NavigationProperty Name="Customer" Type="NS.Customer" Partner="Orders"/>
              </EntityType>
              <EntityContainer Name="C">
                <EntitySet Name="Customers" EntityType="NS.Customer">
                  <NavigationPropertyBinding Path="Orders" Target="Orders"/>
                </EntitySet>
                <EntitySet Name="Orders" EntityType="NS.Order">
                  <NavigationPropertyBinding Path="Customer" Target="Customers"/>
                </EntitySet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// V2: `HeaderSet` → `ItemSet` (`ToItems`, composite item key `Id`,`Pos`) through an association without a referential constraint.
    public static let headersItemsWithoutConstraintV2 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
          <edmx:DataServices m:DataServiceVersion="2.0">
            <Schema Namespace="S" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="Header">
                <Key><PropertyRef Name="Id"/></Key>
                <Property Name="Id" Type="Edm.String" Nullable="false"/>
                <NavigationProperty Name="ToItems" Relationship="S.HeaderItems" FromRole="H" ToRole="I"/>
              </EntityType>
              <EntityType Name="Item">
                <Key><PropertyRef Name="Id"/><PropertyRef Name="Pos"/></Key>
                <Property Name="Id" Type="Edm.String" Nullable="false"/>
                <Property Name="Pos" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Qty" Type="Edm.Int32"/>
              </EntityType>
              <Association Name="HeaderItems">
                <End Type="S.Header" Multiplicity="1" Role="H"/>
                <End Type="S.Item" Multiplicity="*" Role="I"/>
              </Association>
              <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
                <EntitySet Name="HeaderSet" EntityType="S.Header"/>
                <EntitySet Name="ItemSet" EntityType="S.Item"/>
                <AssociationSet Name="HeaderItemsSet" Association="S.HeaderItems">
                  <End EntitySet="HeaderSet" Role="H"/>
                  <End EntitySet="ItemSet" Role="I"/>
                </AssociationSet>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// V4: `Customers`, `Orders` (Int64 key, Decimal, DateTimeOffset, `Customer` with a referential constraint) and `Lines` (composite key).
    public static let customersOrdersLinesV4 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="NS" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Customer">
                <Key><PropertyRef Name="CustomerID"/></Key>
                <Property Name="CustomerID" Type="Edm.String" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
                <NavigationProperty Name="Orders" Type="Collection(NS.Order)" Partner="Customer"/>
              </EntityType>
              <EntityType Name="Order">
                <Key><PropertyRef Name="OrderID"/></Key>
                <Property Name="OrderID" Type="Edm.Int64" Nullable="false"/>
                <Property Name="CustomerID" Type="Edm.String"/>
                <Property Name="Freight" Type="Edm.Decimal" Scale="4"/>
                <Property Name="OrderDate" Type="Edm.DateTimeOffset"/>
                <NavigationProperty Name="Customer" Type="NS.Customer" Partner="Orders">
                  <ReferentialConstraint Property="CustomerID" ReferencedProperty="CustomerID"/>
                </NavigationProperty>
              </EntityType>
              <EntityType Name="Line">
                <Key><PropertyRef Name="OrderID"/><PropertyRef Name="Pos"/></Key>
                <Property Name="OrderID" Type="Edm.Int64" Nullable="false"/>
                <Property Name="Pos" Type="Edm.Int32" Nullable="false"/>
              </EntityType>
              <EntityContainer Name="C">
                <EntitySet Name="Customers" EntityType="NS.Customer">
                  <NavigationPropertyBinding Path="Orders" Target="Orders"/>
                </EntitySet>
                <EntitySet Name="Orders" EntityType="NS.Order">
                  <NavigationPropertyBinding Path="Customer" Target="Customers"/>
                </EntitySet>
                <EntitySet Name="Lines" EntityType="NS.Line"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// V2: `Orders` (Decimal, DateTime) with `Items` (composite key) through a referential constraint, and a function import `Confirm` (POST).
    public static let ordersItemsWithFunctionV2 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
          <edmx:DataServices m:DataServiceVersion="2.0">
            <Schema Namespace="S" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
              <EntityType Name="Order">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.String" Nullable="false"/>
                <Property Name="Amount" Type="Edm.Decimal" Precision="13" Scale="3"/>
                <Property Name="Created" Type="Edm.DateTime"/>
                <NavigationProperty Name="Items" Relationship="S.OrderItems" FromRole="O" ToRole="I"/>
              </EntityType>
              <EntityType Name="Item">
                <Key><PropertyRef Name="OrderID"/><PropertyRef Name="Pos"/></Key>
                <Property Name="OrderID" Type="Edm.String" Nullable="false"/>
                <Property Name="Pos" Type="Edm.Int32" Nullable="false"/>
              </EntityType>
              <Association Name="OrderItems">
                <End Type="S.Order" Multiplicity="1" Role="O"/>
                <End Type="S.Item" Multiplicity="*" Role="I"/>
                <ReferentialConstraint>
                  <Principal Role="O"><PropertyRef Name="ID"/></Principal>
                  <Dependent Role="I"><PropertyRef Name="OrderID"/></Dependent>
                </ReferentialConstraint>
              </Association>
              <EntityContainer Name="C" m:IsDefaultEntityContainer="true">
                <EntitySet Name="Orders" EntityType="S.Order"/>
                <EntitySet Name="Items" EntityType="S.Item"/>
                <AssociationSet Name="OrderItemsSet" Association="S.OrderItems">
                  <End EntitySet="Orders" Role="O"/>
                  <End EntitySet="Items" Role="I"/>
                </AssociationSet>
                <FunctionImport Name="Confirm" ReturnType="Edm.Boolean" m:HttpMethod="POST">
                  <Parameter Name="ID" Type="Edm.String" Mode="In"/>
                </FunctionImport>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    /// V4: `Products` (`ID` Int32 key, `Name`, `Price` Decimal) and `Notes` (`Code` String key, `Text`).
    public static let productsNotesV4 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="S" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EntityType Name="Product">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
                <Property Name="Price" Type="Edm.Decimal" Scale="2"/>
              </EntityType>
              <EntityType Name="Note">
                <Key><PropertyRef Name="Code"/></Key>
                <Property Name="Code" Type="Edm.String" Nullable="false"/>
                <Property Name="Text" Type="Edm.String"/>
              </EntityType>
              <EntityContainer Name="C">
                <EntitySet Name="Products" EntityType="S.Product"/>
                <EntitySet Name="Notes" EntityType="S.Note"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """
}
