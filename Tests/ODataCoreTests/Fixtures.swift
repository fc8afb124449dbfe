import Foundation

@testable import ODataCore

enum Fixtures {
    static func file(_ name: String) throws -> String {
        let here = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath()
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let candidates = [
            root.deletingLastPathComponent().appendingPathComponent("shared/data/odata/\(name)"),
            URL(fileURLWithPath: "/work/shared/data/odata/\(name)"),
        ]
        let url = candidates.first { FileManager.default.fileExists(atPath: $0.path) } ?? candidates[0]
        return try String(contentsOf: url, encoding: .utf8)
    }

    static let northwindV4 = """
        <?xml version="1.0" encoding="utf-8"?>
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="NorthwindModel" Alias="NW" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EnumType Name="Color" UnderlyingType="Edm.Int32" IsFlags="true">
                <Member Name="Red" Value="1"/><Member Name="Green" Value="2"/><Member Name="Blue" Value="4"/>
              </EnumType>
              <ComplexType Name="Address">
                <Property Name="Street" Type="Edm.String"/>
                <Property Name="City" Type="Edm.String"/>
              </ComplexType>
              <EntityType Name="Customer">
                <Key><PropertyRef Name="CustomerID"/></Key>
                <Property Name="CustomerID" Type="Edm.String" Nullable="false" MaxLength="5"/>
                <Property Name="CompanyName" Type="Edm.String" Nullable="false" MaxLength="40"/>
                <Property Name="City" Type="Edm.String"/>
                <Property Name="Country" Type="Edm.String"/>
                <Property Name="Address" Type="NW.Address"/>
                <Property Name="Tags" Type="Collection(Edm.String)"/>
                <Property Name="Version" Type="Edm.Int64"/>
                <NavigationProperty Name="Orders" Type="Collection(NorthwindModel.Order)" Partner="Customer"/>
              </EntityType>
              <EntityType Name="Order">
                <Key><PropertyRef Name="OrderID"/></Key>
                <Property Name="OrderID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="CustomerID" Type="Edm.String" MaxLength="5"/>
                <Property Name="OrderDate" Type="Edm.DateTimeOffset"/>
                <Property Name="ShipDate" Type="Edm.Date"/>
                <Property Name="Freight" Type="Edm.Decimal" Precision="19" Scale="4"/>
                <Property Name="Paint" Type="NW.Color"/>
                <Property Name="TrackingId" Type="Edm.Guid"/>
                <NavigationProperty Name="Customer" Type="NorthwindModel.Customer" Partner="Orders">
                  <ReferentialConstraint Property="CustomerID" ReferencedProperty="CustomerID"/>
                </NavigationProperty>
                <NavigationProperty Name="Order_Details" Type="Collection(NorthwindModel.Order_Detail)" Partner="Order"/>
              </EntityType>
              <EntityType Name="SpecialOrder" BaseType="NW.Order">
                <Property Name="Priority" Type="Edm.Int16"/>
              </EntityType>
              <EntityType Name="Product">
                <Key><PropertyRef Name="ProductID"/></Key>
                <Property Name="ProductID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="ProductName" Type="Edm.String"/>
                <Property Name="UnitPrice" Type="Edm.Decimal" Scale="4"/>
                <Property Name="Discontinued" Type="Edm.Boolean" Nullable="false"/>
                <Property Name="Picture" Type="Edm.Binary"/>
              </EntityType>
              <EntityType Name="Order_Detail">
                <Key><PropertyRef Name="OrderID"/><PropertyRef Name="ProductID"/></Key>
                <Property Name="OrderID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="ProductID" Type="Edm.Int32" Nullable="false"/>
                <Property Name="Quantity" Type="Edm.Int16"/>
                <Property Name="UnitPrice" Type="Edm.Decimal"/>
                <NavigationProperty Name="Order" Type="NorthwindModel.Order" Nullable="false" Partner="Order_Details">
                  <ReferentialConstraint Property="OrderID" ReferencedProperty="OrderID"/>
                </NavigationProperty>
                <NavigationProperty Name="Product" Type="NorthwindModel.Product" Nullable="false">
                  <ReferentialConstraint Property="ProductID" ReferencedProperty="ProductID"/>
                </NavigationProperty>
              </EntityType>
              <EntityContainer Name="Container">
                <EntitySet Name="Customers" EntityType="NorthwindModel.Customer">
                  <NavigationPropertyBinding Path="Orders" Target="Orders"/>
                </EntitySet>
                <EntitySet Name="Orders" EntityType="NW.Order">
                  <NavigationPropertyBinding Path="Customer" Target="Customers"/>
                  <NavigationPropertyBinding Path="Order_Details" Target="Order_Details"/>
                </EntitySet>
                <EntitySet Name="Products" EntityType="NorthwindModel.Product"/>
                <EntitySet Name="Order_Details" EntityType="NorthwindModel.Order_Detail">
                  <NavigationPropertyBinding Path="Order" Target="Orders"/>
                  <NavigationPropertyBinding Path="Product" Target="Products"/>
                </EntitySet>
              </EntityContainer>
              <Annotations Target="NorthwindModel.Container/Customers">
                <Annotation Term="Org.OData.Core.V1.OptimisticConcurrency">
                  <Collection><PropertyPath>Version</PropertyPath></Collection>
                </Annotation>
              </Annotations>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let tripPin = """
        <edmx:Edmx Version="4.01" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx">
          <edmx:DataServices>
            <Schema Namespace="Trippin" xmlns="http://docs.oasis-open.org/odata/ns/edm">
              <EnumType Name="PersonGender"><Member Name="Male"/><Member Name="Female"/><Member Name="Unknown"/></EnumType>
              <ComplexType Name="Location"><Property Name="Address" Type="Edm.String"/></ComplexType>
              <EntityType Name="Person" OpenType="true">
                <Key><PropertyRef Name="UserName"/></Key>
                <Property Name="UserName" Type="Edm.String" Nullable="false"/>
                <Property Name="Gender" Type="Trippin.PersonGender" Nullable="false"/>
                <Property Name="AddressInfo" Type="Collection(Trippin.Location)"/>
                <Property Name="Age" Type="Edm.Int64"/>
                <NavigationProperty Name="Friends" Type="Collection(Trippin.Person)"/>
                <NavigationProperty Name="BestFriend" Type="Trippin.Person"/>
                <NavigationProperty Name="Trips" Type="Collection(Trippin.Trip)" ContainsTarget="true"/>
              </EntityType>
              <EntityType Name="Employee" BaseType="Trippin.Person">
                <Property Name="Cost" Type="Edm.Int64" Nullable="false"/>
              </EntityType>
              <EntityType Name="Trip">
                <Key><PropertyRef Name="TripId"/></Key>
                <Property Name="TripId" Type="Edm.Int32" Nullable="false"/>
                <Property Name="ShareId" Type="Edm.Guid" Nullable="false"/>
                <Property Name="Budget" Type="Edm.Single" Nullable="false"/>
                <Property Name="StartsAt" Type="Edm.DateTimeOffset" Nullable="false"/>
                <Property Name="Duration" Type="Edm.Duration"/>
              </EntityType>
              <Function Name="GetFavoriteAirline" IsBound="true" IsComposable="true">
                <Parameter Name="person" Type="Trippin.Person"/>
                <ReturnType Type="Edm.String"/>
              </Function>
              <Function Name="GetNearestAirport">
                <Parameter Name="lat" Type="Edm.Double" Nullable="false"/>
                <Parameter Name="lon" Type="Edm.Double" Nullable="false"/>
                <ReturnType Type="Edm.String"/>
              </Function>
              <Action Name="ResetDataSource"/>
              <EntityContainer Name="Container">
                <EntitySet Name="People" EntityType="Trippin.Person">
                  <NavigationPropertyBinding Path="Friends" Target="People"/>
                  <NavigationPropertyBinding Path="BestFriend" Target="People"/>
                </EntitySet>
                <Singleton Name="Me" Type="Trippin.Person">
                  <NavigationPropertyBinding Path="Friends" Target="People"/>
                </Singleton>
                <FunctionImport Name="GetNearestAirport" Function="Trippin.GetNearestAirport"/>
                <ActionImport Name="ResetDataSource" Action="Trippin.ResetDataSource"/>
              </EntityContainer>
            </Schema>
          </edmx:DataServices>
        </edmx:Edmx>
        """

    static let northwindV4Model: EdmModel = try! CSDLParser.parse(northwindV4)
    static let tripPinModel: EdmModel = try! CSDLParser.parse(tripPin)
    static let northwindV2Model: EdmModel = try! CSDLParser.parse(try! file("northwind-v2-metadata.xml"))
    static let sapV2Model: EdmModel = try! CSDLParser.parse(try! file("sap-v2-metadata.xml"))
}
