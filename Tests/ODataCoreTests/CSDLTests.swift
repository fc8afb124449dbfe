import Testing

@testable import ODataCore

@Suite struct CSDLNorthwindV2Tests {
    let model = Fixtures.northwindV2Model

    @Test func versionAndCounts() {
        #expect(model.version == .v2)
        #expect(model.edmxVersion == "1.0")
        #expect(model.dataServiceVersion == "1.0")
        #expect(model.schemas.map(\.namespace) == ["NorthwindModel", "ODataWeb.Northwind.Model"])
        #expect(model.entityTypes.count == 26)
        #expect(model.complexTypes.isEmpty)
        #expect(model.entitySets.count == 26)
        #expect(model.associations.count == 11)
        #expect(model.associationSets.count == 11)
        #expect(model.operationImports.isEmpty)
        #expect(model.containerName == "NorthwindEntities")
    }

    @Test func keysAndProperties() throws {
        #expect(model.key(of: "NorthwindModel.Order_Detail") == ["OrderID", "ProductID"])
        #expect(
            model.key(of: "NorthwindModel.Alphabetical_list_of_product") == [
                "ProductID", "ProductName", "Discontinued", "CategoryName",
            ])
        let set = try #require(model.entitySet(named: "Order_Details"))
        #expect(set.entityType == "NorthwindModel.Order_Detail")
        let freight = try #require(model.property(named: "Freight", in: "NorthwindModel.Order"))
        #expect(freight.type.primitive == .decimal)
        #expect(freight.precision == 19 && freight.scale == 4 && freight.nullable)
        let id = try #require(model.property(named: "CustomerID", in: "NorthwindModel.Customer"))
        #expect(id.maxLength == 5 && !id.nullable)
        #expect(id.annotations["FixedLength"] == nil && id.annotations["Unicode"] == nil)
        let description = try #require(model.property(named: "Description", in: "NorthwindModel.Category"))
        #expect(description.isMaxLengthMax && description.maxLength == nil)
        #expect(model.keyProperties(of: "NorthwindModel.Order").map(\.type.primitive) == [.int32])
    }

    @Test func navigationThroughAssociations() throws {
        let toCustomer = try #require(model.navigationProperty(named: "Customer", in: "NorthwindModel.Order"))
        #expect(toCustomer.target == "NorthwindModel.Customer")
        #expect(!toCustomer.isCollection)
        #expect(toCustomer.partner == "Orders")
        #expect(
            toCustomer.referentialConstraints == [
                .init(property: "CustomerID", referencedProperty: "CustomerID")
            ])
        let orders = try #require(model.navigationProperty(named: "Orders", in: "NorthwindModel.Customer"))
        #expect(orders.isCollection && orders.target == "NorthwindModel.Order")
        #expect(
            orders.referentialConstraints == [.init(property: "CustomerID", referencedProperty: "CustomerID")]
        )
        // Self-association: Employee.Employees1 (principal -> dependents) joins EmployeeID = ReportsTo.
        let reports = try #require(
            model.navigationProperty(named: "Employees1", in: "NorthwindModel.Employee"))
        #expect(reports.isCollection)
        #expect(
            reports.referentialConstraints == [.init(property: "EmployeeID", referencedProperty: "ReportsTo")]
        )
        let boss = try #require(model.navigationProperty(named: "Employee1", in: "NorthwindModel.Employee"))
        #expect(!boss.isCollection && boss.nullable)
        #expect(
            boss.referentialConstraints == [.init(property: "ReportsTo", referencedProperty: "EmployeeID")])
        // Many-to-many without constraint.
        let demo = try #require(
            model.navigationProperty(named: "CustomerDemographics", in: "NorthwindModel.Customer"))
        #expect(demo.isCollection && demo.referentialConstraints.isEmpty)
        let association = try #require(model.associations["NorthwindModel.FK_Order_Details_Orders"])
        #expect(association.principalRole == "Orders" && association.dependentProperties == ["OrderID"])
        #expect(association.end(role: "Order_Details")?.multiplicity == "*")
    }

    @Test func bindingsFromAssociationSets() throws {
        let orders = try #require(model.entitySet(named: "Orders"))
        #expect(orders.navigationBindings["Customer"] == "Customers")
        #expect(orders.navigationBindings["Order_Details"] == "Order_Details")
        let employees = try #require(model.entitySet(named: "Employees"))
        #expect(employees.navigationBindings["Employees1"] == "Employees")
        #expect(employees.navigationBindings["Employee1"] == "Employees")
        #expect(model.targetEntitySet(from: orders, navigationPath: "Customer")?.name == "Customers")
    }
}

@Suite struct CSDLSAPV2Tests {
    let model = Fixtures.sapV2Model

    @Test func versionAndCounts() {
        #expect(model.version == .v2)
        #expect(model.dataServiceVersion == "2.0")
        #expect(model.schemas.map(\.namespace) == ["EXAMPLE_SRV", "EXAMPLE_SRV_SETS"])
        #expect(model.entityTypes.count == 14)
        #expect(model.complexTypes.count == 4)
        #expect(model.enumTypes.count == 2)
        #expect(model.entitySets.count == 14)
        #expect(model.associations.count == 6)
        #expect(model.associationSets.count == 6)
        #expect(model.operationImports.count == 6)
    }

    @Test func sloppyNamesResolved() throws {
        #expect(model.entitySet(named: "Employees")?.entityType == "EXAMPLE_SRV_SETS.Employee")
        let getMax = try #require(model.operationImport(named: "get_max"))
        #expect(getMax.returnType == EdmTypeRef(name: "EXAMPLE_SRV.TemperatureMeasurement"))
        #expect(getMax.httpMethod == "GET" && getMax.entitySet == "TemperatureMeasurements")
        let best = try #require(model.operationImport(named: "get_best_measurements"))
        #expect(best.returnType?.isCollection == true)
        let sum = try #require(model.operationImport(named: "sum"))
        #expect(sum.parameters.map(\.name) == ["A", "B"])
        #expect(sum.parameters.map(\.type.primitive) == [.int32, .int32])
        #expect(sum.parameters.first?.mode == "In")
        #expect(
            model.operationImport(named: "retrieve")?.annotations["sap:action-for"]
                == "EXAMPLE_SRV.MasterEntity")
        #expect(
            model.property(named: "CountryOfOrigin", in: "EXAMPLE_SRV.EnumTest")?.type.name
                == "EXAMPLE_SRV.Country")
    }

    @Test func compositeKeysAndSAPAnnotations() throws {
        #expect(model.key(of: "EXAMPLE_SRV.TemperatureMeasurement") == ["Sensor", "Date"])
        #expect(model.key(of: "EXAMPLE_SRV_SETS.Enumeration") == ["EntityType", "PropertyName", "RefKey"])
        let cars = try #require(model.entitySet(named: "Cars"))
        #expect(cars.annotations["sap:pageable"] == "false")
        let sensor = try #require(model.property(named: "Sensor", in: "EXAMPLE_SRV.TemperatureMeasurement"))
        #expect(sensor.annotations["sap:filterable"] == "true")
        #expect(model.structuredType("EXAMPLE_SRV.CarIDPic")?.hasStream == true)
        let language = try #require(model.enumTypes["EXAMPLE_SRV.Language"])
        #expect(language.isFlags && language.members.map(\.name) == ["English", "Czech", "Japanese"])
    }

    @Test func associationsAndConstraints() throws {
        let orders = try #require(model.navigationProperty(named: "Orders", in: "EXAMPLE_SRV.Customer"))
        #expect(orders.isCollection && orders.target == "EXAMPLE_SRV.Order")
        #expect(orders.referentialConstraints == [.init(property: "Name", referencedProperty: "Owner")])
        // Principal/Dependent without the ReferentialConstraint wrapper is tolerated.
        let referred = try #require(model.associations["EXAMPLE_SRV.CustomerReferredBy"])
        #expect(referred.principalRole == "CustomerRole" && referred.dependentRole == "ReferredByRole")
        let addresses = try #require(
            model.navigationProperty(named: "Addresses", in: "EXAMPLE_SRV_SETS.Employee"))
        #expect(addresses.isCollection && addresses.target == "EXAMPLE_SRV_SETS.Address")
        #expect(model.entitySet(named: "Employees")?.navigationBindings["Addresses"] == "Addresses")
        #expect(model.entitySet(named: "Cars")?.navigationBindings["IDPic"] == "CarIDPics")
    }
}

@Suite struct CSDLV4Tests {
    @Test func northwindLike() throws {
        let model = Fixtures.northwindV4Model
        #expect(model.version == .v4 && model.edmxVersion == "4.0")
        #expect(model.entityTypes.count == 5 && model.complexTypes.count == 1 && model.enumTypes.count == 1)
        #expect(model.entitySets.map(\.name) == ["Customers", "Orders", "Products", "Order_Details"])
        #expect(model.entitySet(named: "Orders")?.entityType == "NorthwindModel.Order")  // alias resolved
        #expect(
            model.property(named: "Address", in: "NorthwindModel.Customer")?.type.name
                == "NorthwindModel.Address")
        #expect(model.property(named: "Tags", in: "NorthwindModel.Customer")?.type.isCollection == true)
        #expect(model.key(of: "NorthwindModel.Order_Detail") == ["OrderID", "ProductID"])
        // Inheritance: key and properties from the base type.
        #expect(model.key(of: "NorthwindModel.SpecialOrder") == ["OrderID"])
        #expect(model.properties(of: "NorthwindModel.SpecialOrder").last?.name == "Priority")
        #expect(model.navigationProperty(named: "Customer", in: "NorthwindModel.SpecialOrder") != nil)
        #expect(model.isType("NorthwindModel.SpecialOrder", derivedFrom: "NW.Order"))
        // Partner-derived constraint.
        let orders = try #require(model.navigationProperty(named: "Orders", in: "NorthwindModel.Customer"))
        #expect(orders.isCollection && orders.partner == "Customer")
        #expect(
            orders.referentialConstraints == [.init(property: "CustomerID", referencedProperty: "CustomerID")]
        )
        let details = try #require(
            model.navigationProperty(named: "Order_Details", in: "NorthwindModel.Order"))
        #expect(details.referentialConstraints == [.init(property: "OrderID", referencedProperty: "OrderID")])
        // ETag from Core.OptimisticConcurrency.
        #expect(model.concurrencyProperties(of: "NorthwindModel.Customer").map(\.name) == ["Version"])
        #expect(model.entitySet(named: "Customers")?.navigationBindings["Orders"] == "Orders")
        let color = try #require(model.enumTypes["NorthwindModel.Color"])
        #expect(color.value(of: "Blue") == 4 && color.isFlags)
    }

    @Test func tripPinLike() throws {
        let model = Fixtures.tripPinModel
        #expect(model.version == .v4 && model.edmxVersion == "4.01")
        let me = try #require(model.entitySet(named: "Me"))
        #expect(me.isSingleton && me.entityType == "Trippin.Person")
        #expect(model.structuredType("Trippin.Person")?.isOpen == true)
        #expect(model.operations.count == 3)
        let bound = try #require(model.operations.first { $0.name == "GetFavoriteAirline" })
        #expect(bound.isBound && bound.isComposable && bound.parameters.first?.type.name == "Trippin.Person")
        let nearest = try #require(model.operationImport(named: "GetNearestAirport"))
        #expect(nearest.kind == .functionImport && nearest.httpMethod == "GET")
        #expect(nearest.parameters.map(\.name) == ["lat", "lon"])
        #expect(nearest.returnType == EdmTypeRef(name: "Edm.String"))
        let reset = try #require(model.operationImport(named: "ResetDataSource"))
        #expect(reset.kind == .actionImport && reset.httpMethod == "POST")
        let trips = try #require(model.navigationProperty(named: "Trips", in: "Trippin.Employee"))
        #expect(trips.containsTarget && trips.isCollection)
        #expect(model.enumTypes["Trippin.PersonGender"]?.value(of: "Female") == 1)
    }

    @Test func malformedDocumentsThrow() {
        #expect(throws: ODataError.self) { try CSDLParser.parse("<not-xml") }
        #expect(throws: ODataError.self) { try CSDLParser.parse("<root/>") }
        #expect(throws: ODataError.self) {
            try CSDLParser.parse(#"<edmx:Edmx xmlns:edmx="x" Version="4.0"><edmx:DataServices/></edmx:Edmx>"#)
        }
        let deep = String(repeating: "<a>", count: 2000) + String(repeating: "</a>", count: 2000)
        #expect(throws: ODataError.self) { try CSDLParser.parse(deep) }
        let xxe = """
            <?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>
            <edmx:Edmx Version="4.0" xmlns:edmx="e"><edmx:DataServices><Schema Namespace="N">&x;</Schema>
            </edmx:DataServices></edmx:Edmx>
            """
        if let model = try? CSDLParser.parse(xxe) { #expect(model.entitySets.isEmpty) }
    }
}

/// `OnDelete` (issue 16, undo local creation): V4's child of the navigation property, V2's on the
/// Association end the navigation starts from.
@Test func onDeleteActionsAreRead() throws {
    let v4 = try CSDLParser.parse(
        """
        <edmx:Edmx Version="4.0" xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx"><edmx:DataServices>
        <Schema Namespace="S" xmlns="http://docs.oasis-open.org/odata/ns/edm">
        <EntityType Name="P"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <NavigationProperty Name="Kids" Type="Collection(S.K)" Partner="Parent"><OnDelete Action="Cascade"/></NavigationProperty>
        </EntityType>
        <EntityType Name="K"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <Property Name="PID" Type="Edm.Int32"/>
        <NavigationProperty Name="Parent" Type="S.P" Partner="Kids"><ReferentialConstraint Property="PID" ReferencedProperty="ID"/></NavigationProperty>
        </EntityType>
        <EntityContainer Name="C"><EntitySet Name="Ps" EntityType="S.P"/><EntitySet Name="Ks" EntityType="S.K"/></EntityContainer>
        </Schema></edmx:DataServices></edmx:Edmx>
        """)
    #expect(v4.navigationProperty(named: "Kids", in: "S.P")?.cascadesOnDelete == true)
    #expect(v4.navigationProperty(named: "Parent", in: "S.K")?.onDelete == nil)
    let v2 = try CSDLParser.parse(
        """
        <edmx:Edmx Version="1.0" xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx"
          xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata">
        <edmx:DataServices m:DataServiceVersion="2.0"><Schema Namespace="S" xmlns="http://schemas.microsoft.com/ado/2008/09/edm">
        <EntityType Name="P"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <NavigationProperty Name="Kids" Relationship="S.PK" FromRole="P" ToRole="K"/></EntityType>
        <EntityType Name="K"><Key><PropertyRef Name="ID"/></Key><Property Name="ID" Type="Edm.Int32" Nullable="false"/>
        <Property Name="PID" Type="Edm.Int32"/><NavigationProperty Name="Parent" Relationship="S.PK" FromRole="K" ToRole="P"/></EntityType>
        <Association Name="PK"><End Type="S.P" Multiplicity="1" Role="P"><OnDelete Action="Cascade"/></End>
        <End Type="S.K" Multiplicity="*" Role="K"/>
        <ReferentialConstraint><Principal Role="P"><PropertyRef Name="ID"/></Principal>
        <Dependent Role="K"><PropertyRef Name="PID"/></Dependent></ReferentialConstraint></Association>
        <EntityContainer Name="C" m:IsDefaultEntityContainer="true"><EntitySet Name="Ps" EntityType="S.P"/>
        <EntitySet Name="Ks" EntityType="S.K"/></EntityContainer></Schema></edmx:DataServices></edmx:Edmx>
        """)
    #expect(v2.navigationProperty(named: "Kids", in: "S.P")?.cascadesOnDelete == true)
    #expect(v2.navigationProperty(named: "Parent", in: "S.K")?.cascadesOnDelete == false)
}
