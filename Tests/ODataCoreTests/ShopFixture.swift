@testable import ODataCore

/// A V4 model with the features issue 15 lists: inheritance (abstract, open and derived types, inherited
/// keys), singletons, containment, nested complex types with inheritance, collections of primitives and of
/// complex values, enums with and without flags, type definitions, every primitive type, partners given on
/// one side only.
enum ShopFixture {
    static let csdl = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.01" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Shop.Model" Alias="Shop" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <TypeDefinition Name="Sku" UnderlyingType="Edm.String" MaxLength="16" Unicode="false"/>
              <TypeDefinition Name="Money" UnderlyingType="Edm.Decimal" Precision="38" Scale="10"/>
              <EnumType Name="Color" UnderlyingType="Edm.Int32" IsFlags="true">
                <Member Name="Red" Value="1"/><Member Name="Green" Value="2"/><Member Name="Blue" Value="4"/>
              </EnumType>
              <EnumType Name="Status"><Member Name="Open"/><Member Name="Shipped"/><Member Name="Closed"/></EnumType>
              <ComplexType Name="GeoPoint">
                <Property Name="Lat" Type="Edm.Double"/><Property Name="Lon" Type="Edm.Double"/>
              </ComplexType>
              <ComplexType Name="Address">
                <Property Name="Street" Type="Edm.String"/>
                <Property Name="City" Type="Edm.String"/>
                <Property Name="Geo" Type="Shop.GeoPoint"/>
              </ComplexType>
              <ComplexType Name="PostalAddress" BaseType="Shop.Address">
                <Property Name="PostBox" Type="Edm.String"/>
              </ComplexType>
              <EntityType Name="Person" Abstract="false">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
                <Property Name="Address" Type="Shop.Address"/>
                <Property Name="Emails" Type="Collection(Edm.String)"/>
                <Property Name="Addresses" Type="Collection(Shop.Address)"/>
                <NavigationProperty Name="Friends" Type="Collection(Shop.Person)"/>
              </EntityType>
              <EntityType Name="Employee" BaseType="Shop.Person">
                <Property Name="Salary" Type="Shop.Money"/>
                <Property Name="HiredOn" Type="Edm.Date"/>
                <Property Name="DepartmentID" Type="Edm.Int32"/>
                <NavigationProperty Name="Manager" Type="Shop.Employee" Partner="Reports"/>
                <NavigationProperty Name="Reports" Type="Collection(Shop.Employee)" Partner="Manager"/>
                <NavigationProperty Name="Department" Type="Shop.Department">
                  <ReferentialConstraint Property="DepartmentID" ReferencedProperty="ID"/>
                </NavigationProperty>
              </EntityType>
              <EntityType Name="Customer" BaseType="Shop.Person" OpenType="true">
                <Property Name="Tier" Type="Edm.Int16"/>
                <NavigationProperty Name="Orders" Type="Collection(Shop.Order)" Partner="Customer"/>
              </EntityType>
              <EntityType Name="Product">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String" Nullable="false"/>
                <Property Name="Description" Type="Edm.String"/>
                <Property Name="Sku" Type="Shop.Sku"/>
                <Property Name="Price" Type="Edm.Decimal" Precision="38" Scale="variable"/>
                <Property Name="ShelfLife" Type="Edm.Duration"/>
                <Property Name="ReleaseDate" Type="Edm.Date"/>
                <Property Name="AvailableFrom" Type="Edm.TimeOfDay"/>
                <Property Name="Created" Type="Edm.DateTimeOffset" Precision="7"/>
                <Property Name="Rating" Type="Edm.Double"/>
                <Property Name="Weight" Type="Edm.Single"/>
                <Property Name="Stock" Type="Edm.Int64"/>
                <Property Name="Code" Type="Edm.Guid"/>
                <Property Name="Thumbnail" Type="Edm.Binary"/>
                <Property Name="Tags" Type="Collection(Edm.String)"/>
                <Property Name="Colors" Type="Shop.Color"/>
                <Property Name="Status" Type="Shop.Status"/>
                <Property Name="Discontinued" Type="Edm.Boolean"/>
                <Property Name="Small" Type="Edm.Byte"/>
                <Property Name="Tiny" Type="Edm.SByte"/>
                <Property Name="Units" Type="Edm.Int16"/>
                <Property Name="Location" Type="Edm.GeographyPoint" SRID="4326"/>
                <Property Name="Photo" Type="Edm.Stream"/>
                <Property Name="Extra" Type="Edm.Untyped"/>
              </EntityType>
              <EntityType Name="Order">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Date" Type="Edm.DateTimeOffset"/>
                <Property Name="Status" Type="Shop.Status"/>
                <Property Name="CustomerID" Type="Edm.Int32"/>
                <NavigationProperty Name="Lines" Type="Collection(Shop.OrderLine)" ContainsTarget="true"/>
                <NavigationProperty Name="Customer" Type="Shop.Customer" Partner="Orders">
                  <ReferentialConstraint Property="CustomerID" ReferencedProperty="ID"/>
                </NavigationProperty>
              </EntityType>
              <EntityType Name="OrderLine">
                <Key><PropertyRef Name="LineNo"/></Key>
                <Property Name="LineNo" Type="Edm.Int32" Nullable="false"/>
                <Property Name="ProductID" Type="Edm.Int32"/>
                <Property Name="Quantity" Type="Edm.Int32"/>
                <Property Name="Amount" Type="Shop.Money"/>
                <NavigationProperty Name="Product" Type="Shop.Product">
                  <ReferentialConstraint Property="ProductID" ReferencedProperty="ID"/>
                </NavigationProperty>
              </EntityType>
              <EntityType Name="Company">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
                <Property Name="Headquarters" Type="Shop.Address"/>
                <NavigationProperty Name="Departments" Type="Collection(Shop.Department)"/>
              </EntityType>
              <EntityType Name="Department">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Name" Type="Edm.String"/>
                <Property Name="Budget" Type="Shop.Money"/>
                <NavigationProperty Name="Staff" Type="Collection(Shop.Employee)" Partner="Department"/>
              </EntityType>
              <EntityType Name="Document" Abstract="true" HasStream="true">
                <Key><PropertyRef Name="ID"/></Key>
                <Property Name="ID" Type="Edm.Guid" Nullable="false"/>
              </EntityType>
              <EntityType Name="Invoice" BaseType="Shop.Document">
                <Property Name="Total" Type="Shop.Money"/>
              </EntityType>
              <Function Name="TopProducts" IsBound="true">
                <Parameter Name="bindingParameter" Type="Collection(Shop.Product)"/>
                <Parameter Name="n" Type="Edm.Int32"/>
                <ReturnType Type="Collection(Shop.Product)"/>
              </Function>
              <EntityContainer Name="Container">
                <EntitySet Name="People" EntityType="Shop.Person">
                  <NavigationPropertyBinding Path="Friends" Target="People"/>
                  <NavigationPropertyBinding Path="Shop.Employee/Manager" Target="People"/>
                  <NavigationPropertyBinding Path="Shop.Employee/Reports" Target="People"/>
                  <NavigationPropertyBinding Path="Shop.Employee/Department" Target="Departments"/>
                  <NavigationPropertyBinding Path="Shop.Customer/Orders" Target="Orders"/>
                </EntitySet>
                <EntitySet Name="Products" EntityType="Shop.Product"/>
                <EntitySet Name="Orders" EntityType="Shop.Order">
                  <NavigationPropertyBinding Path="Customer" Target="People"/>
                  <NavigationPropertyBinding Path="Lines/Product" Target="Products"/>
                </EntitySet>
                <EntitySet Name="Departments" EntityType="Shop.Department">
                  <NavigationPropertyBinding Path="Staff" Target="People"/>
                </EntitySet>
                <EntitySet Name="Documents" EntityType="Shop.Document"/>
                <Singleton Name="Company" Type="Shop.Company">
                  <NavigationPropertyBinding Path="Departments" Target="Departments"/>
                </Singleton>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let model: EdmModel = try! CSDLParser.parse(csdl)
}
